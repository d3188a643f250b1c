// loopsupervisor's tool hook for OpenCode (tested with 1.18.33): copy this
// file into your project's .opencode/plugins/ (or ~/.config/opencode/plugins/)
// and run OpenCode under loopsupervisor. OpenCode loads every *.js file there
// by itself; nothing else needs installing.
//
// Before each tool call it asks the supervisor that started OpenCode, as
// Claude Code's PreToolUse hook does: it posts {hook_event_name, session_id,
// tool_name, tool_input} to $LOOPSUPERVISOR_HOOK_URL with the run's token
// ($LOOPSUPERVISOR_HOOK_TOKEN). On "block" it throws, so the call does not
// run and the model reads the reason as the call's error; on "nudge" the
// call runs and the nudge is appended to its output, which is how it reaches
// the model. Outside a supervisor, with the supervisor down, slow (500 ms),
// or on any error, the call runs: the hook must never be why an agent stops
// working. An answer must carry the supervisor's proof (an HMAC-SHA256 under
// the token over a fresh nonce and the body), so a process squatting on a
// dead supervisor's port cannot block calls.
import { createHmac, randomUUID, timingSafeEqual } from "node:crypto"

const TIMEOUT_MS = 500

// Nudges waiting for their call's output, by OpenCode's call id.
const nudges = new Map()

async function ask(sessionID, tool, args) {
  const url = process.env.LOOPSUPERVISOR_HOOK_URL
  const token = process.env.LOOPSUPERVISOR_HOOK_TOKEN
  if (!url || !token || !sessionID || !tool) return undefined
  try {
    const nonce = randomUUID()
    const res = await fetch(url, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${token}`,
        "Content-Type": "application/json",
        "Loopsupervisor-Hook-Nonce": nonce,
      },
      body: JSON.stringify({ hook_event_name: "PreToolUse", session_id: sessionID, tool_name: tool, tool_input: args ?? {} }),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
    if (!res.ok) return undefined
    const body = Buffer.from(await res.arrayBuffer())
    const want = createHmac("sha256", token).update(nonce).update(Buffer.from([0])).update(body).digest("hex")
    const got = res.headers.get("Loopsupervisor-Hook-Mac") ?? ""
    if (got.length !== want.length || !timingSafeEqual(Buffer.from(got), Buffer.from(want))) return undefined
    return JSON.parse(body.toString("utf8"))
  } catch {
    return undefined
  }
}

export default async function LoopSupervisorPlugin() {
  return {
    "tool.execute.before": async (input, output) => {
      const answer = await ask(input.sessionID, input.tool, output?.args)
      if (answer?.decision === "block" && answer.reason) {
        throw new Error(answer.reason)
      }
      if (answer?.decision === "nudge" && answer.reason) {
        nudges.set(input.callID, answer.reason)
      }
    },
    "tool.execute.after": async (input, output) => {
      const nudge = nudges.get(input.callID)
      if (nudge === undefined) return
      nudges.delete(input.callID)
      if (output && typeof output.output === "string") {
        output.output += "\n\n" + nudge
      }
    },
  }
}
