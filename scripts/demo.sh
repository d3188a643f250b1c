#!/usr/bin/env bash
# otelcol-loop demo (`make demo`): an agent falls into the loop of the
# 1,972-call incident (the same bash call, the same answer, over and over),
# the collector sees it, the supervisor warns it (the nudge, through
# --on-warn) and then stops it; the story lines show the tokens the loop
# burned.
#
#   bin/otelcol-loop (config/demo.yaml)  <--OTLP--  bin/loopagent --scenario bash-loop
#        | loop_detect -> alert_sink --signed kill webhook-->  bin/loopsupervisor (runs the agent)
#
# Everything listens on 127.0.0.1, on free ports chosen now. Everything this
# script starts it stops again, by PID. Files are kept in a temporary
# directory whose path is printed at the end.
#
# Environment: DEMO_SPEED   time compression of the agent (default 4: the
#                           ~85 s of agent time take ~22 s)
#              DEMO_SCENARIO default bash-loop (`bin/loopagent --list`)
#              DEMO_KEEP=0  delete the files at the end (their paths are then not printed)
#              DEMO_HOLD=1  keep the collector running (metrics endpoint up)
#                           until Enter is pressed
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/bin"
SPEED="${DEMO_SPEED:-4}"
SCENARIO="${DEMO_SCENARIO:-bash-loop}"
KEEP="${DEMO_KEEP:-1}"
MAKE="${MAKE:-make}"

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
say() { printf '%s\n' "$*"; }
# now: wall-clock time of day with milliseconds, as demowatch prints it.
now() {
	local t="${EPOCHREALTIME:-}"
	if [ -n "$t" ]; then
		t="${t/,/.}"
		printf '%(%H:%M:%S)T.%s' "${t%.*}" "${t#*.}" | cut -c1-12
	else
		date +%H:%M:%S.%3N
	fi
}
# line TAG TEXT: one timestamped story line, "[tag]        HH:MM:SS.mmm  text".
line() { printf '%-12s %s  %s\n' "[$1]" "$(now)" "$2"; }
bline() { bold "$(printf '%-12s %s  %s' "[$1]" "$(now)" "$2")"; }

# --- build what is missing (make demo has built the rest) ---------------------
[ -x "$BIN/otelcol-loop" ] || (cd "$ROOT" && $MAKE build-distribution)
for b in loopagent loopsupervisor; do
	[ -x "$BIN/$b" ] || (cd "$ROOT" && go build -o "$BIN/$b" "./cmd/$b")
done
(cd "$ROOT" && go build -o "$BIN/demowatch" ./scripts/demowatch)

WORK="$(mktemp -d "${TMPDIR:-/tmp}/otelcol-loop-demo.XXXXXX")"
PIDS=()
NAMES=()

stop_all() {
	local pid i stopped=()
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		pid="${PIDS[i]}"
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for i in "${!PIDS[@]}"; do
		pid="${PIDS[i]}"
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		stopped+=("${NAMES[i]} $pid")
	done
	if [ ${#stopped[@]} -gt 0 ]; then
		say "stopped: $(IFS=,; echo "${stopped[*]}" | sed 's/,/, /g')"
	fi
	PIDS=()
	NAMES=()
	if [ "$KEEP" = 0 ]; then rm -rf "$WORK"; fi
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
track() { PIDS+=("$1"); NAMES+=("$2"); }

# --- free loopback ports -----------------------------------------------------
USED=" "
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		case "$USED" in *" $p "*) continue ;; esac
		# A refused connection means nothing listens there.
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			USED="$USED$p "
			echo "$p"
			return
		fi
	done
}

# http_get PORT PATH: prints the response body of a plain HTTP/1.0 GET.
http_get() {
	local body
	exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
	body="$(cat <&3)"
	exec 3<&- 3>&-
	printf '%s' "$body" | tr -d '\r' | sed '1,/^$/d'
}
http_ok() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET %s HTTP/1.0\r\n\r\n' "$2" >&3 && head -1 <&3 | grep -q ' 200') 2>/dev/null
}
# json_field NAME: the value of a top-level string or number field of the
# JSON line on stdin (enough for the flat result lines).
json_field() { sed -n 's/.*"'"$1"'":"\{0,1\}\([^",}]*\)"\{0,1\}[,}].*/\1/p' | head -1; }

OTLP_GRPC=$(free_port)
OTLP_HTTP=$(free_port)
METRICS=$(free_port)
HEALTH=$(free_port)
SUPERVISOR=$(free_port)
# The kill secret, in a 0600 file both the collector and the supervisor
# read: never in either one's environment.
SECRETS="$WORK/kill.secrets"
(umask 077 && echo "whsec_$(head -c 32 /dev/urandom | base64 | tr -d '\n')" >"$SECRETS")
TRACES="$WORK/traces.jsonl"
RESULT="$WORK/result.jsonl"

bold "otelcol-loop demo: scenario $SCENARIO, agent time x$SPEED, everything on 127.0.0.1"
DESCRIPTION="$("$BIN/loopagent" --list 2>/dev/null | awk -F'\t' -v n="$SCENARIO" '$1 == n {print $2}')"
[ -n "$DESCRIPTION" ] && say "  the agent: $DESCRIPTION"
if [ "$KEEP" = 0 ]; then
	say "  files: in a temporary directory, deleted at the end (DEMO_KEEP=0)"
else
	say "  files: $WORK"
fi
say "  [collector] lines are read back from the exported trace file (flushed every 200 ms);"
say "  their time is when the collector decided, so they may print a moment after what they caused."
say ""

# --- 1. the collector --------------------------------------------------------
env LOOPDETECT_WEBHOOK_SECRETS_FILE="$SECRETS" LOOPSUPERVISOR_PORT="$SUPERVISOR" \
	LOOP_OTLP_GRPC_PORT="$OTLP_GRPC" LOOP_OTLP_HTTP_PORT="$OTLP_HTTP" \
	LOOP_METRICS_PORT="$METRICS" LOOP_HEALTH_PORT="$HEALTH" LOOP_TRACES_FILE="$TRACES" \
	"$BIN/otelcol-loop" --config "$ROOT/config/demo.yaml" >"$WORK/collector.log" 2>&1 &
COLLECTOR_PID=$!
track "$COLLECTOR_PID" otelcol-loop
for _ in $(seq 100); do
	http_ok "$HEALTH" / && break
	kill -0 "$COLLECTOR_PID" 2>/dev/null || { say "collector exited; its log:"; cat "$WORK/collector.log"; exit 1; }
	sleep 0.1
done
http_ok "$HEALTH" / || { say "collector not healthy after 10 s; its log:"; tail -20 "$WORK/collector.log"; exit 1; }
bline collector "otelcol-loop pid $COLLECTOR_PID ready: OTLP on :$OTLP_HTTP (http) :$OTLP_GRPC (grpc), metrics on :$METRICS, kills go to :$SUPERVISOR"

# --- 2. the watcher: transitions as the collector exports them ---------------
"$BIN/demowatch" --follow --file "$TRACES" --prefix "[collector]  " &
track $! demowatch

# --- 3. the supervisor around the agent --------------------------------------
"$BIN/loopsupervisor" --secrets-file "$SECRETS" --listen "127.0.0.1:$SUPERVISOR" --grace 5s --backstop 10m \
	--on-warn 'echo "loopsupervisor: nudge for the agent: $LOOPSUPERVISOR_NUDGE" >&2' \
	--result-file "$RESULT" -- \
	"$BIN/loopagent" --endpoint "127.0.0.1:$OTLP_HTTP" --scenario "$SCENARIO" --speed "$SPEED" \
	>"$WORK/agent.stdout" 2>"$WORK/supervisor+agent.log" &
SUP_PID=$!
track "$SUP_PID" loopsupervisor
bline supervisor "loopsupervisor pid $SUP_PID runs: loopagent --scenario $SCENARIO --speed $SPEED"

# show_log: the agent's calls (every 4th of the first 16, then all of them)
# and the supervisor's lines, timestamped as they appear; a bash loop, so
# nothing buffers.
show_log() {
	local l n
	while IFS= read -r l; do
		case "$l" in
		"loopagent: call "*)
			n="${l#loopagent: call }"
			n="${n%% *}"
			if [ "$n" -le 16 ] && [ $((n % 4)) -ne 1 ]; then continue; fi
			l="${l#loopagent: }"
			line agent "${l% (trace *}"
			;;
		"loopagent: terminated"*) bline agent "${l#loopagent: }" ;;
		"loopagent: "*) line agent "${l#loopagent: }" ;;
		*"loopsupervisor: verified warn"*) bline supervisor "> ${l#*loopsupervisor: }" ;;
		*"loopsupervisor: nudge for the agent"*) line supervisor "  ${l#*loopsupervisor: }" ;;
		*"loopsupervisor: verified kill"*) bline supervisor ">>> ${l#*loopsupervisor: }" ;;
		*"loopsupervisor: "*) line supervisor "${l#*loopsupervisor: }" ;;
		esac
	done
}
mkfifo "$WORK/log.fifo"
show_log <"$WORK/log.fifo" &
track $! log-filter
# GNU tail stops by itself once the supervisor has exited (--pid).
tail --pid="$SUP_PID" -n +1 -F "$WORK/supervisor+agent.log" >"$WORK/log.fifo" 2>/dev/null &
track $! tail

START=$SECONDS
SUP_CODE=0
wait "$SUP_PID" || SUP_CODE=$?
# Let the watcher show the kill transition: the file exporter flushes every
# 200 ms, demowatch polls every 100 ms. Wait (at most 5 s) until the event
# the supervisor acted on is in the file, then one more poll.
EVENT_ID="$( [ -s "$RESULT" ] && json_field event_id <"$RESULT" || true)"
for _ in $(seq 50); do
	{ [ -z "$EVENT_ID" ] || grep -q "\"$EVENT_ID\"" "$TRACES" 2>/dev/null; } && break
	sleep 0.1
done
sleep 0.5
say ""
case "$SUP_CODE" in
86) bline supervisor "exited 86 after $((SECONDS - START)) s: the agent was stopped on a verified loop kill" ;;
0) bline supervisor "exited 0 after $((SECONDS - START)) s: the agent finished by itself" ;;
*) bline supervisor "exited $SUP_CODE after $((SECONDS - START)) s" ;;
esac

# --- 4. the result line ------------------------------------------------------
say ""
if [ -s "$RESULT" ]; then
	if [ "$KEEP" = 0 ]; then bold "result line (written by the supervisor):"; else bold "result line (written by the supervisor to $RESULT):"; fi
	sed 's/^/  /' "$RESULT"
	R="$(head -1 "$RESULT")"
	say "  = status $(json_field status <<<"$R"), $(json_field kind <<<"$R") for $(json_field reason <<<"$R"):" \
		"agent pid $(json_field agent_pid <<<"$R") stopped with $(json_field signal <<<"$R"), exit code $(json_field exit_code <<<"$R")"
elif [ -s "$WORK/agent.stdout" ]; then
	bold "result line (written by the agent, it finished by itself):"
	sed 's/^/  /' "$WORK/agent.stdout"
else
	say "no result line was written"
fi
if [ -s "$WORK/agent.stdout" ] && [ -s "$RESULT" ]; then
	say "  (the agent also printed: $(cat "$WORK/agent.stdout"))"
fi
if [ -s "$RESULT" ]; then
	say "  session       the id the supervisor gave this agent run (its service.instance.id): kills are matched on it"
	say "  loop_session  the collector's session key for the loop: the trace id here, or gen_ai.conversation.id"
	say "                when the agent sets one (session.keys); the same key as in the transition events"
fi

# --- why the kill came when it did -------------------------------------------
# The first stuck verdict and the kill may be calls apart: only some reasons
# kill at once. Both calls and the policy are read from what ran.
EVENTS="$("$BIN/demowatch" --json --file "$TRACES" 2>/dev/null || true)"
FIRST_STUCK="$(grep '"to":"stuck"' <<<"$EVENTS" | head -1 || true)"
KILL_EVENT="$(grep '"kill":true' <<<"$EVENTS" | head -1 || true)"
if [ -n "$FIRST_STUCK" ] && [ -n "$KILL_EVENT" ]; then
	S_CALL="$(json_field call_index <<<"$FIRST_STUCK")"
	K_CALL="$(json_field call_index <<<"$KILL_EVENT")"
	if [ "$S_CALL" != "$K_CALL" ]; then
		KILL_REASONS="$(sed -n 's/^ *reasons: *\[\(.*\)\].*/\1/p' "$ROOT/config/demo.yaml" | head -1)"
		KILL_REASONS="${KILL_REASONS//, / or }"
		AFTER_CALLS="$(sed -n 's/^ *after_loop_calls: *\([0-9]*\).*/\1/p' "$ROOT/config/demo.yaml" | head -1)"
		say ""
		bold "why the kill came at call $K_CALL and not at call $S_CALL"
		say "  call $S_CALL made the session stuck ($(json_field reason <<<"$FIRST_STUCK"): $(json_field explanation <<<"$FIRST_STUCK"))."
		say "  The kill policy (config/demo.yaml, kill:) kills at once only for ${KILL_REASONS:-its kill.reasons},"
		say "  and any other stuck loop once it has lasted ${AFTER_CALLS:-kill.after_loop_calls} calls: two identical results in a row"
		say "  may still be a slow poll. Call $K_CALL: $(json_field reason <<<"$KILL_EVENT") ($(json_field explanation <<<"$KILL_EVENT")), so the kill was sent."
	fi
fi

# --- 5. where to look --------------------------------------------------------
say ""
bold "where to look"
say "  collector metrics   http://127.0.0.1:$METRICS/metrics   (values now:)"
http_get "$METRICS" /metrics 2>/dev/null | grep -E '^otelcol_(loopdetect|alertsink)_[a-z_]+(\{[^}]*\})? ' |
	grep -vE '_bucket|_sum |_count ' | sed 's/^/                        /' | head -20 || true
if [ "$KEEP" = 0 ]; then
	say "  exported traces, collector log, supervisor + agent log: deleted now (DEMO_KEEP=0);"
	say "                      run \`make demo\` without DEMO_KEEP=0 to keep them"
else
	say "  exported traces     $TRACES"
	if [ -n "$EVENT_ID" ]; then
		say "                      the kill is event $EVENT_ID: a span event \"loopdetect.transition\" on the"
		say "                      tool span that completed the loop (OTLP JSON, one batch a line)"
	else
		say "                      transition events are span events \"loopdetect.transition\" (OTLP JSON)"
	fi
	say "                      replay them: bin/demowatch --file $TRACES"
	say "  collector log       $WORK/collector.log"
	say "  supervisor + agent  $WORK/supervisor+agent.log"
fi
say "  your own agent      README.md, \"Watch your own agent\""
say ""
if [ "${DEMO_HOLD:-0}" = 1 ] && [ -t 0 ]; then
	read -r -p "the collector is still running (metrics on :$METRICS); press Enter to stop everything " _ || true
fi
bold "stopping everything this demo started"
