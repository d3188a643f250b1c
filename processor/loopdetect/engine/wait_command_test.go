package engine

import "testing"

// TestCommandWaits: which command lines wait, read as a shell splits them.
// Only command words count: a sleep inside a quoted argument is data.
func TestCommandWaits(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		waits      bool
		label      string
	}{
		// Waits.
		{"sleep then poll", "sleep 30 && gh run view 4242 --json status,conclusion", true, "gh run view"},
		{"sleep with unit", "sleep 2m; gh run view 4242", true, "gh run view"},
		{"poll then sleep", "gh run view 4242 --json status; sleep 30", true, "gh run view"},
		{"sleep by path", "/bin/sleep 45 && curl -s localhost:8080/health", true, "curl"},
		{"sleep of a variable", `sleep "$INTERVAL" && gh run view 1`, true, "gh run view"},
		{"timeout", "timeout 300 kubectl rollout status deploy/web", true, "kubectl rollout status"},
		{"timeout with options", "timeout -s KILL 60 ./scripts/wait-ready.sh", true, "wait-ready.sh"},
		{"watch script", `watch -n 5 'gh run view 4242 --json status'`, true, "gh run view"},
		{"wait flag", "helm upgrade web ./chart --wait", true, "helm upgrade web"},
		{"wait flag with value", "docker compose up -d --wait=true", true, "docker compose up"},
		{"interval flag and value", "gh run watch 4242 --interval 10", true, "gh run watch"},
		{"watching subcommand", "gh run watch 4242 --exit-status", true, "gh run watch"},
		{"kubectl wait", "kubectl wait --for=condition=available deploy/web --timeout=120s", true, "kubectl wait"},
		{"rollout status", "kubectl rollout status deployment/web -n prod", true, "kubectl rollout status"},
		{"until loop", "until curl -sf localhost:8080/health; do sleep 0.5; done", true, "curl"},
		{"for loop with short sleep", "for i in 1 2 3; do gh run view 7 && break; sleep 0.2; done", true, "gh run view"},
		{"wait builtin", "npm run build & wait; cat build.log", true, "npm run build"},
		{"bash -c script", `bash -lc 'sleep 20 && gh pr checks 12'`, true, "gh pr checks"},
		{"env before sleep", "FOO=1 sleep 30 && make status", true, "make status"},
		{"cd first", "cd /home/dev/shop && sleep 30 && gh run view 4242", true, "gh run view"},
		{"echo first", `echo "--- poll"; sleep 30; gh run view 4242`, true, "gh run view"},
		{"redirections", "sleep 30 >/dev/null 2>&1 && gh run view 9 2>/dev/null", true, "gh run view"},
		// Near misses.
		{"no wait", "gh run view 4242 --json status,conclusion", false, ""},
		{"sleepy is another program", "sleepy 30 && gh run view 4242", false, ""},
		{"waiter is another flag", "deploy --waiter=5 && deploy status", false, ""},
		{"no-wait", "az group delete -n rg --no-wait", false, ""},
		{"sleep quoted in an echo", `echo "sleep 30 && gh run view 4242"`, false, ""},
		{"sleep in single quotes", `git commit -m 'sleep 30 before polling'`, false, ""},
		{"short sleep outside a loop", "sleep 0.2 && gh run view 4242", false, ""},
		{"wait as a message", "git commit -m wait", false, ""},
		{"while read loop", "while read f; do wc -l $f; done < files.txt", false, ""},
		{"timeout word in a path", "cat logs/timeout.txt", false, ""},
		{"sleep in a comment", "gh run view 4242 # then sleep 30", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readCommand(tc.line)
			if got.waits != tc.waits {
				t.Fatalf("readCommand(%q).waits = %v, want %v", tc.line, got.waits, tc.waits)
			}
			if tc.waits && got.label != tc.label {
				t.Fatalf("readCommand(%q).label = %q, want %q", tc.line, got.label, tc.label)
			}
		})
	}
}

// TestCommandOwner: the owner is the command without its wait — the same
// job however long the wait, another job for other words.
func TestCommandOwner(t *testing.T) {
	base := readCommand("sleep 30 && gh run view 4242 --json status,conclusion").owner
	if base == 0 {
		t.Fatal("a poll has an owner")
	}
	for _, tc := range []struct {
		name, line string
		same       bool
	}{
		{"a longer sleep", "sleep 60 && gh run view 4242 --json status,conclusion", true},
		{"the sleep after", "gh run view 4242 --json status,conclusion; sleep 30", true},
		{"spaces and quotes", `sleep 30  &&  gh run view "4242" --json 'status,conclusion'`, true},
		{"a timeout around it", "timeout 120 gh run view 4242 --json status,conclusion", true},
		{"another run", "sleep 30 && gh run view 4243 --json status,conclusion", false},
		{"other fields", "sleep 30 && gh run view 4242 --json status", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readCommand(tc.line).owner
			if (got == base) != tc.same {
				t.Fatalf("owner of %q equal to the base poll's: %v, want %v", tc.line, got == base, tc.same)
			}
		})
	}
	// The wait flags are the wait's: --interval and its value are no part of the job.
	if readCommand("gh run watch 4242 --interval 10").owner != readCommand("gh run watch 4242 --interval=30").owner {
		t.Fatal("--interval's value changed the owner")
	}
	// A bare wait polls nothing.
	for _, line := range []string{"sleep 30", "wait", "timeout 30 sleep 60"} {
		if w := readCommand(line); !w.waits || w.owner != 0 {
			t.Fatalf("readCommand(%q) = %+v, want a wait without an owner", line, w)
		}
	}
}

// TestArgvCommand: a command given as its words (Codex CLI's shell tool).
func TestArgvCommand(t *testing.T) {
	w := readArgv([]string{"bash", "-lc", "sleep 15 && gh run view 4242 --json status"})
	if !w.waits || w.owner == 0 || w.label != "gh run view" {
		t.Fatalf("readArgv = %+v", w)
	}
	if got := readCommand("sleep 15 && gh run view 4242 --json status"); got.owner != w.owner {
		t.Fatal("the same script as a line and as argv has two owners")
	}
	if w := readArgv([]string{"gh", "run", "view", "4242"}); w.waits {
		t.Fatalf("readArgv without a wait = %+v", w)
	}
}

// TestCommandBounds: hostile lines end, whatever they hold.
func TestCommandBounds(t *testing.T) {
	long := make([]byte, 0, 3*maxCommandScan)
	for len(long) < 3*maxCommandScan {
		long = append(long, "sleep 1; "...)
	}
	for _, line := range []string{string(long), `"unterminated 'quote`, "$(((((", "bash -c 'bash -c \"bash -c sleep\"'", "`", "\\", ">", "2>&1 >"} {
		_ = readCommand(line) // must not panic or run away
	}
}
