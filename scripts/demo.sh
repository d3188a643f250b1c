#!/usr/bin/env bash
# otelcol-loop demo: an agent falls into the seed-000 loop, the collector
# sees it, the supervisor stops it.
#
#   bin/otelcol-loop (config/demo.yaml)  <--OTLP--  bin/loopagent --scenario seed000
#        | loop_detect -> alert_sink --signed kill webhook-->  bin/loopsupervisor (runs the agent)
#
# Everything listens on 127.0.0.1, on free ports chosen now. Everything this
# script starts it stops again, by PID. Files are kept in a temporary
# directory whose path is printed at the end.
#
# Environment: DEMO_SPEED (time compression of the agent, default 4),
#              DEMO_SCENARIO (default seed000), DEMO_KEEP=0 to delete the files.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/bin"
SPEED="${DEMO_SPEED:-4}"
SCENARIO="${DEMO_SCENARIO:-seed000}"
MAKE="${MAKE:-make}"

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
say() { printf '%s\n' "$*"; }

# --- build what is missing ---------------------------------------------------
[ -x "$BIN/otelcol-loop" ] || (cd "$ROOT" && $MAKE build-distribution)
for b in loopagent loopsupervisor; do
	[ -x "$BIN/$b" ] || (cd "$ROOT" && go build -o "$BIN/$b" "./cmd/$b")
done
[ -x "$BIN/demowatch" ] || (cd "$ROOT" && go build -o "$BIN/demowatch" ./scripts/demowatch)

WORK="$(mktemp -d "${TMPDIR:-/tmp}/otelcol-loop-demo.XXXXXX")"
PIDS=()

stop_all() {
	local pid i
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		pid="${PIDS[i]}"
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
	if [ "${DEMO_KEEP:-1}" = 0 ]; then rm -rf "$WORK"; fi
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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

OTLP_GRPC=$(free_port)
OTLP_HTTP=$(free_port)
METRICS=$(free_port)
HEALTH=$(free_port)
SUPERVISOR=$(free_port)
SECRET="whsec_$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
TRACES="$WORK/traces.jsonl"
RESULT="$WORK/result.jsonl"

bold "otelcol-loop demo — scenario $SCENARIO, agent time x$SPEED"
say "  files: $WORK"
say ""

# --- 1. the collector --------------------------------------------------------
env LOOPDETECT_WEBHOOK_SECRET="$SECRET" LOOPSUPERVISOR_PORT="$SUPERVISOR" \
	LOOP_OTLP_GRPC_PORT="$OTLP_GRPC" LOOP_OTLP_HTTP_PORT="$OTLP_HTTP" \
	LOOP_METRICS_PORT="$METRICS" LOOP_HEALTH_PORT="$HEALTH" LOOP_TRACES_FILE="$TRACES" \
	"$BIN/otelcol-loop" --config "$ROOT/config/demo.yaml" >"$WORK/collector.log" 2>&1 &
PIDS+=($!)
COLLECTOR_PID=$!
for _ in $(seq 100); do
	http_ok "$HEALTH" / && break
	kill -0 "$COLLECTOR_PID" 2>/dev/null || { say "collector exited; its log:"; cat "$WORK/collector.log"; exit 1; }
	sleep 0.1
done
http_ok "$HEALTH" / || { say "collector not healthy after 10 s; its log:"; tail -20 "$WORK/collector.log"; exit 1; }
bold "[collector]  otelcol-loop pid $COLLECTOR_PID: OTLP on 127.0.0.1:$OTLP_HTTP (http) and :$OTLP_GRPC (grpc), kill webhooks to 127.0.0.1:$SUPERVISOR"

# --- 2. the watcher: transitions as the collector records them ---------------
"$BIN/demowatch" --follow --file "$TRACES" --prefix "[collector]  " &
PIDS+=($!)

# --- 3. the supervisor around the agent --------------------------------------
# The agent's per-call log goes to a file; a filter shows the calls of the
# loop phase and every 4th call before it, so the screen stays readable.
env LOOPSUPERVISOR_SECRETS="$SECRET" \
	"$BIN/loopsupervisor" --listen "127.0.0.1:$SUPERVISOR" --grace 5s --backstop 10m \
	--result-file "$RESULT" -- \
	"$BIN/loopagent" --endpoint "127.0.0.1:$OTLP_HTTP" --scenario "$SCENARIO" --speed "$SPEED" \
	>"$WORK/agent.stdout" 2>"$WORK/supervisor+agent.log" &
SUP_PID=$!
PIDS+=($SUP_PID)
bold "[supervisor] loopsupervisor pid $SUP_PID runs: loopagent --scenario $SCENARIO --speed $SPEED"

# show_log: the agent's calls (all of the loop phase, every 4th before it)
# and the supervisor's lines, prefixed; a bash loop, so nothing buffers.
show_log() {
	local line n
	while IFS= read -r line; do
		case "$line" in
		"loopagent: call "*)
			n="${line#loopagent: call }"
			n="${n%% *}"
			if [ "$n" -le 16 ] && [ $((n % 4)) -ne 1 ]; then continue; fi
			line="${line#loopagent: }"
			printf '[agent]      %s\n' "${line% (trace *}"
			;;
		"loopagent: "*) printf '[agent]      %s\n' "${line#loopagent: }" ;;
		*"loopsupervisor: "*) printf '[supervisor] %s\n' "${line#*loopsupervisor: }" ;;
		esac
	done
}
mkfifo "$WORK/log.fifo"
show_log <"$WORK/log.fifo" &
PIDS+=($!)
# GNU tail stops by itself once the supervisor has exited (--pid).
tail --pid="$SUP_PID" -n +1 -F "$WORK/supervisor+agent.log" >"$WORK/log.fifo" 2>/dev/null &
PIDS+=($!)

START=$(date +%s)
SUP_CODE=0
wait "$SUP_PID" || SUP_CODE=$?
sleep 1 # let the watcher and the log filter catch up
say ""
bold "[supervisor] exited with code $SUP_CODE after $(($(date +%s) - START)) s$([ "$SUP_CODE" = 86 ] && echo ' (86: agent stopped on a verified loop kill)')"

# --- 4. the result line ------------------------------------------------------
if [ -s "$RESULT" ]; then
	bold "result line (written by the supervisor):"
	sed 's/^/  /' "$RESULT"
elif [ -s "$WORK/agent.stdout" ]; then
	bold "result line (written by the agent, it finished by itself):"
	sed 's/^/  /' "$WORK/agent.stdout"
else
	say "no result line was written"
fi
if [ -s "$WORK/agent.stdout" ] && [ -s "$RESULT" ]; then
	say "  (the agent also printed: $(cat "$WORK/agent.stdout"))"
fi

# --- 5. where to look --------------------------------------------------------
say ""
bold "where to look"
say "  collector metrics  http://127.0.0.1:$METRICS/metrics  (now, before shutdown):"
http_get "$METRICS" /metrics 2>/dev/null | grep -E '^otelcol_(loopdetect|alertsink)_[a-z_]+(\{[^}]*\})? ' |
	grep -vE '_bucket|_sum |_count ' | sed 's/^/    /' | head -20 || true
say "  exported traces    $TRACES"
say "                     (OTLP JSON; the event \"loopdetect.transition\" sits on the tool span that caused it;"
say "                      bin/demowatch --file $TRACES prints them again)"
say "  collector log      $WORK/collector.log"
say "  supervisor + agent $WORK/supervisor+agent.log"
say ""
bold "stopping everything this demo started"
