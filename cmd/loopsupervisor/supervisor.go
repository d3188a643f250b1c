//go:build unix

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// Exit codes (documented in main.go and docs/webhook.md).
const (
	exitUsage    = 2
	exitInternal = 70
	exitKilled   = 86
	exitBackstop = 87
)

// Environment variables.
const (
	// EnvSecrets holds the whsec_ secrets (space or comma separated), read
	// only with --allow-env-secrets. It is removed from the agent's
	// environment.
	envSecrets = "LOOPSUPERVISOR_SECRETS"
	// EnvSessionID tells the agent its supervisor session id (equal to the
	// service.instance.id the supervisor put into OTEL_RESOURCE_ATTRIBUTES).
	envSessionID = "LOOPSUPERVISOR_SESSION_ID"
	// EnvResult hands the result line to the clean-up hook.
	envResult = "LOOPSUPERVISOR_RESULT"
	// The --on-warn command's environment: the verified webhook body (JSON),
	// the suggested nudge text, the reason code and the explanation.
	envVerdict     = "LOOPSUPERVISOR_VERDICT"
	envNudge       = "LOOPSUPERVISOR_NUDGE"
	envReason      = "LOOPSUPERVISOR_REASON"
	envExplanation = "LOOPSUPERVISOR_EXPLANATION"
)

// signalGroup sends sig to every process of group pgid. Tests wrap it to
// count signals.
var signalGroup = func(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }

type options struct {
	listen       string
	addrFile     string
	secretFile   string
	allowEnv     bool
	agentUser    string
	resultFile   string
	onKill       string
	onWarn       string
	instanceID   string
	serviceName  string
	grace        time.Duration
	backstop     time.Duration
	tolerance    time.Duration
	replayWindow time.Duration
	hookTimeout  time.Duration
	// hookPatience is how many of a loop's calls the agent's hook blocks
	// while a verified kill is held (--hook-patience).
	hookPatience int
	// exportInterval is the agent's telemetry export delay set by default
	// (--export-interval; 0 leaves the agent's SDK defaults).
	exportInterval time.Duration
	argv           []string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("loopsupervisor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loopsupervisor [flags] -- AGENT_CMD ARGS...")
		fmt.Fprintln(stderr, "Secrets: --secrets-file (mode 0600), or $"+envSecrets+" with --allow-env-secrets (whsec_..., at most 4).")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8787", "loopback address to serve kill webhooks on (port 0 picks a free port)")
	fs.StringVar(&o.addrFile, "addr-file", "", "write the address actually listened on to this file")
	fs.StringVar(&o.secretFile, "secrets-file", "", "file with one or two whsec_ secrets, one per line; must not be readable by group or others (0600)")
	fs.StringVar(&o.secretFile, "secret-file", "", "older name of --secrets-file")
	fs.BoolVar(&o.allowEnv, "allow-env-secrets", false, "also read secrets from $"+envSecrets+" (an agent of the same user can read the supervisor's environment where /proc is open to it)")
	fs.StringVar(&o.agentUser, "agent-user", "", "run the agent as this user (name or uid), so it can read neither the secrets file nor the supervisor's memory; needs root")
	fs.StringVar(&o.resultFile, "result-file", "", "append the JSON result line to this file instead of stdout")
	fs.StringVar(&o.onKill, "on-kill", "", "clean-up hook run with /bin/sh -c after the agent was stopped; gets $"+envResult)
	fs.StringVar(&o.onWarn, "on-warn", "", "command run with /bin/sh -c on a verified warn (the step before a kill), e.g. to nudge the agent; gets $"+envVerdict+", $"+envNudge+", $"+envReason+", $"+envExplanation)
	fs.StringVar(&o.instanceID, "instance-id", "", fmt.Sprintf("session / service.instance.id to give the agent; the only key a kill is accepted for, so it must be unguessable (at least %d characters; default: a random UUID)", minInstanceIDLen))
	fs.StringVar(&o.serviceName, "service-name", "", "set OTEL_SERVICE_NAME for the agent (default: not set, so the name the agent gives itself stands)")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL to the agent's process group")
	fs.DurationVar(&o.backstop, "backstop", 2*time.Hour, "wall-clock limit for the agent (0 disables)")
	fs.DurationVar(&o.tolerance, "timestamp-tolerance", 5*time.Minute, "accepted distance of webhook-timestamp from now")
	fs.DurationVar(&o.replayWindow, "replay-window", 15*time.Minute, "how long webhook ids are remembered (must cover the timestamp window and the kill retry horizon)")
	fs.DurationVar(&o.hookTimeout, "hook-timeout", 30*time.Second, "time limit of the clean-up hook")
	fs.IntVar(&o.hookPatience, "hook-patience", 2, "when the agent runs `loopsupervisor hook`: how many of a loop's calls it blocks with the nudge while a verified kill waits; the next one carries the kill out (0: kills at once)")
	fs.DurationVar(&o.exportInterval, "export-interval", 200*time.Millisecond, "export delay given to the agent's OTel SDK (OTEL_BSP_SCHEDULE_DELAY, OTEL_BLRP_SCHEDULE_DELAY, OTEL_LOGS_EXPORT_INTERVAL) unless the environment sets them; their 5 s defaults delay every verdict by up to 5 s (0 keeps the SDK's defaults)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.argv = fs.Args()
	if len(o.argv) == 0 {
		fs.Usage()
		return o, errors.New("no agent command given (put it after --)")
	}
	if o.grace < 0 || o.backstop < 0 || o.tolerance <= 0 || o.hookTimeout <= 0 || o.exportInterval < 0 {
		return o, errors.New("durations must not be negative (and --timestamp-tolerance, --hook-timeout positive)")
	}
	if o.hookPatience < 0 {
		return o, fmt.Errorf("--hook-patience %d: must not be negative", o.hookPatience)
	}
	if o.instanceID != "" && len(o.instanceID) < minInstanceIDLen {
		return o, fmt.Errorf("--instance-id %q: at least %d characters: kills are accepted for this id alone, so it must not be guessable", o.instanceID, minInstanceIDLen)
	}
	if o.replayWindow < 2*o.tolerance {
		return o, fmt.Errorf("--replay-window (%s) must be at least twice --timestamp-tolerance (%s)", o.replayWindow, o.tolerance)
	}
	return o, nil
}

func loadKeys(o options) ([][]byte, error) {
	var raw []string
	if o.secretFile != "" {
		f, err := os.Open(o.secretFile)
		if err != nil {
			return nil, fmt.Errorf("--secrets-file: %w", err)
		}
		if err := checkPrivate(f); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("--secrets-file %s: %w", o.secretFile, err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
				raw = append(raw, l)
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("--secrets-file: %w", err)
		}
	}
	if env := os.Getenv(envSecrets); env != "" {
		if !o.allowEnv {
			return nil, errors.New("$" + envSecrets + " is set: secrets in the supervisor's environment are readable by an agent of the same user (/proc/<pid>/environ); use --secrets-file (mode 0600), or --allow-env-secrets to accept the risk")
		}
		raw = append(raw, strings.FieldsFunc(env, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })...)
	}
	if len(raw) == 0 {
		return nil, errors.New("no signing secret: use --secrets-file (or $" + envSecrets + " with --allow-env-secrets)")
	}
	if len(raw) > 4 {
		return nil, fmt.Errorf("at most 4 secrets, got %d", len(raw))
	}
	keys := make([][]byte, 0, len(raw))
	for i, s := range raw {
		k, err := stdwebhook.ParseSecret(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// checkPrivate refuses a secrets file others may read: anyone who can read
// it can sign kills.
func checkPrivate(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %04o lets group or others read it; chmod 0600", perm)
	}
	return nil
}

// agentCredential resolves --agent-user (a name or a numeric uid) to the
// credential the agent is started with: that user's uid, primary gid and
// no supplementary groups. nil when the flag is unset.
func agentCredential(name string) (*syscall.Credential, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("--agent-user %q: %w", name, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("--agent-user %q: %w", name, err)
	}
	if int(uid) == os.Geteuid() {
		return nil, fmt.Errorf("--agent-user %q is the supervisor's own user: the agent could read the secrets", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen: %q is not a loopback address; the supervisor serves plain HTTP on loopback only", host)
}

// minInstanceIDLen is the shortest --instance-id accepted: the id is the
// capability a kill must present, so a short or predictable one would let
// anyone who can send spans stop the agent.
const minInstanceIDLen = 16

// newInstanceID is the default instance id: a random (version 4) UUID,
// 122 bits from crypto/rand.
func newInstanceID() string { return newUUID() }

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// agentEnv is base with the supervisor's secrets removed, the instance id
// appended to OTEL_RESOURCE_ATTRIBUTES (replacing any earlier
// service.instance.id), and the session id set. OTEL_SERVICE_NAME is set only
// when serviceName is given (--service-name): the variable overrides the
// name an agent sets in its own code (Claude Code would report the
// executable's name instead of claude-code), and kills are matched by the
// instance id, not the service name.
func agentEnv(base []string, id, serviceName string) []string {
	var out []string
	resAttrs := ""
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case envSecrets, envSessionID, envHookURL, envHookToken:
			continue
		case "OTEL_RESOURCE_ATTRIBUTES":
			resAttrs = v
			continue
		case "OTEL_SERVICE_NAME":
			if serviceName != "" {
				continue
			}
		}
		out = append(out, kv)
	}
	var parts []string
	for _, p := range strings.Split(resAttrs, ",") {
		k, _, _ := strings.Cut(p, "=")
		if strings.TrimSpace(p) == "" || strings.TrimSpace(k) == "service.instance.id" {
			continue
		}
		parts = append(parts, p)
	}
	parts = append(parts, "service.instance.id="+id)
	out = append(out, "OTEL_RESOURCE_ATTRIBUTES="+strings.Join(parts, ","))
	if serviceName != "" {
		out = append(out, "OTEL_SERVICE_NAME="+serviceName)
	}
	return append(out, envSessionID+"="+id)
}

// exportDelayVars are the OTel SDK settings that hold an agent's finished
// spans and log records before export: the batch span and log record
// processors' delays (OTel SDKs) and Claude Code's logs interval. Each
// defaults to 5 s, which is how late every verdict would be.
var exportDelayVars = []string{"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BLRP_SCHEDULE_DELAY", "OTEL_LOGS_EXPORT_INTERVAL"}

// withExportDefaults sets each export delay the environment leaves unset to
// d (in milliseconds, as the variables are read); the user's own settings
// stand. d == 0 changes nothing.
func withExportDefaults(env []string, d time.Duration) []string {
	if d <= 0 {
		return env
	}
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	for _, k := range exportDelayVars {
		if !set[k] {
			env = append(env, k+"="+strconv.FormatInt(d.Milliseconds(), 10))
		}
	}
	return env
}

// agent is the supervised process group.
type agent struct {
	pid        int // also the process group id (Setpgid)
	leaderDone chan struct{}
	groupDone  chan struct{}
	status     syscall.WaitStatus // valid after leaderDone
}

func startAgent(argv, env []string, cred *syscall.Credential) (*agent, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{os.Stdin.Fd(), os.Stdout.Fd(), os.Stderr.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: cred},
	})
	if err != nil {
		return nil, err
	}
	a := &agent{pid: pid, leaderDone: make(chan struct{}), groupDone: make(chan struct{})}
	go a.reap()
	return a, nil
}

// reap waits for every child in the agent's process group (the leader, and
// descendants reparented to us as subreaper) until none is left.
func (a *agent) reap() {
	leader := false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-a.pid, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			if !leader {
				// Cannot happen (the leader is our child); do not hang.
				close(a.leaderDone)
			}
			close(a.groupDone)
			return
		}
		if pid == a.pid && !leader {
			leader = true
			a.status = ws
			close(a.leaderDone)
		}
	}
}

// safeGroup reports whether pgid may be signalled: a real group that is not
// init's and not our own.
func safeGroup(pgid int) bool {
	return pgid > 1 && pgid != syscall.Getpgrp() && pgid != os.Getpid()
}

// groupAlive reports whether any process is left in the group.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}

// waitGone waits until the group has no process left or d passes.
func (a *agent) waitGone(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	select {
	case <-a.groupDone:
	case <-deadline.C:
		return !groupAlive(a.pid)
	}
	// Members that are not our children (no subreaper support) are polled.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for groupAlive(a.pid) {
		select {
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

type supervisor struct {
	opt       options
	log       *log.Logger
	verifier  webhook.Verifier
	replay    *webhook.ReplayCache
	agent     *agent
	sessionID string
	hostname  string
	killing   atomic.Bool
	killReq   chan webhook.Message
	stdout    io.Writer
	// hooks counts running --on-warn commands; run waits for them.
	hooks sync.WaitGroup
	// book is what the agent's tool-call hook and the verified warns tell
	// of its sessions.
	book *hookBook
}

type reply struct {
	Result  string `json:"result"`
	Session string `json:"session,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (s *supervisor) answer(w http.ResponseWriter, code int, r reply) {
	r.Session = s.sessionID
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(r)
}

func (s *supervisor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.answer(w, http.StatusMethodNotAllowed, reply{Result: "rejected", Error: "POST only"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, webhook.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.answer(w, http.StatusRequestEntityTooLarge, reply{Result: "rejected", Error: "body too large"})
			return
		}
		s.answer(w, http.StatusBadRequest, reply{Result: "rejected", Error: "unreadable body"})
		return
	}
	now := time.Now()
	msg, err := s.verifier.Verify(r.Header, body, now)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, webhook.ErrUnauthorized) {
			code = http.StatusUnauthorized
		}
		s.log.Printf("rejected webhook from %s: %v", r.RemoteAddr, err)
		s.answer(w, code, reply{Result: "rejected", Error: err.Error()})
		return
	}
	if s.replay.Check(msg.WebhookID, now) {
		s.answer(w, http.StatusOK, reply{Result: "already_handled"})
		return
	}
	if msg.Body.Type == webhook.TypeWarn {
		s.warn(w, msg, body, now)
		return
	}
	if msg.Body.Type != webhook.TypeKill {
		s.answer(w, http.StatusOK, reply{Result: "ignored"})
		return
	}
	if !now.Before(msg.Body.ExpiresAt) {
		s.log.Printf("kill %s expired at %s; not acting", msg.Body.ID, msg.Body.ExpiresAt.Format(time.RFC3339))
		s.answer(w, http.StatusOK, reply{Result: "expired"})
		return
	}
	if !s.matches(msg.Body.Target) {
		s.answer(w, http.StatusOK, reply{Result: "not_running"})
		return
	}
	select {
	case <-s.agent.leaderDone:
		s.answer(w, http.StatusOK, reply{Result: "not_running"})
		return
	default:
	}
	if s.killing.Load() {
		s.answer(w, http.StatusOK, reply{Result: "already_handled"})
		return
	}
	if s.book.hold(msg, now) {
		s.answer(w, http.StatusOK, reply{Result: "held"})
		return
	}
	if !s.kill(msg) {
		s.answer(w, http.StatusOK, reply{Result: "already_handled"})
		return
	}
	s.answer(w, http.StatusOK, reply{Result: "killed"})
}

// kill hands a verified kill to run, once; it reports whether this call
// was the one.
func (s *supervisor) kill(msg webhook.Message) bool {
	if !s.killing.CompareAndSwap(false, true) {
		return false
	}
	s.log.Printf("verified kill %s (%s): stopping agent group %d", msg.Body.ID, msg.Body.Transition.Reason, s.agent.pid)
	s.killReq <- msg
	return true
}

// warn handles the ladder's step before a kill: it runs the --on-warn
// command, in the background so the webhook is answered at once, with the
// verdict in its environment. Without --on-warn the warn is only logged.
func (s *supervisor) warn(w http.ResponseWriter, msg webhook.Message, body []byte, now time.Time) {
	if !now.Before(msg.Body.ExpiresAt) {
		s.answer(w, http.StatusOK, reply{Result: "expired"})
		return
	}
	if !s.matches(msg.Body.Target) {
		s.answer(w, http.StatusOK, reply{Result: "not_running"})
		return
	}
	s.log.Printf("verified warn %s (%s): %s", msg.Body.ID, msg.Body.Transition.Reason, msg.Body.Transition.Explanation)
	s.book.warn(msg.Body.Session.Key, msg.Body, now)
	if s.opt.onWarn == "" {
		s.answer(w, http.StatusOK, reply{Result: "warned"})
		return
	}
	env := append(agentEnv(os.Environ(), s.sessionID, "loopsupervisor-hook"),
		envVerdict+"="+string(body),
		envNudge+"="+msg.Body.Nudge,
		envReason+"="+msg.Body.Transition.Reason,
		envExplanation+"="+msg.Body.Transition.Explanation,
	)
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.opt.hookTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.opt.onWarn)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			s.log.Printf("warn hook: %v", err)
		}
	}()
	s.answer(w, http.StatusOK, reply{Result: "warned"})
}

// matches reports whether a kill's target is our agent. The unguessable
// service.instance.id we gave it is required: a PID or host name is no
// secret (a sender can put any process.pid on its spans), so they may only
// narrow the match, never replace the id. The PID may be any process of the
// agent's group: agents that relaunch themselves (Gemini CLI runs its work
// in a child node process) or run under a wrapper (npx, sh -c) report a
// child's PID.
func (s *supervisor) matches(t webhook.Target) bool {
	if t.ServiceInstanceID == "" || subtle.ConstantTimeCompare([]byte(t.ServiceInstanceID), []byte(s.sessionID)) != 1 {
		return false
	}
	if t.PID > 0 && t.PID != int64(s.agent.pid) && !inGroup(t.PID, s.agent.pid) {
		return false
	}
	return t.HostName == "" || t.HostName == s.hostname
}

// inGroup reports whether pid is a live process in process group pgid.
func inGroup(pid int64, pgid int) bool {
	if pid <= 1 || pid > math.MaxInt32 {
		return false
	}
	g, err := syscall.Getpgid(int(pid))
	return err == nil && g == pgid
}

// terminate stops the agent's process group: SIGTERM, grace, SIGKILL. It
// returns the last signal the group needed.
func (s *supervisor) terminate() string {
	pgid := s.agent.pid
	if !safeGroup(pgid) {
		s.log.Printf("refusing to signal process group %d", pgid)
		return "none"
	}
	if err := signalGroup(pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.log.Printf("SIGTERM to group %d: %v", pgid, err)
	}
	if s.agent.waitGone(s.opt.grace) {
		return "SIGTERM"
	}
	s.log.Printf("agent group %d still alive after %s grace: SIGKILL", pgid, s.opt.grace)
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.log.Printf("SIGKILL to group %d: %v", pgid, err)
	}
	if !s.agent.waitGone(5 * time.Second) {
		s.log.Printf("agent group %d not gone 5s after SIGKILL", pgid)
	}
	return "SIGKILL"
}

// result is the one JSON line the supervisor writes when it stopped the agent.
type result struct {
	Status      string `json:"status"`
	Kind        string `json:"kind"`
	Reason      string `json:"reason"`
	Explanation string `json:"explanation"`
	Session     string `json:"session"`
	LoopSession string `json:"loop_session,omitempty"`
	EventID     string `json:"event_id,omitempty"`
	WebhookID   string `json:"webhook_id,omitempty"`
	DecidedAt   string `json:"decided_at,omitempty"`
	AgentPID    int    `json:"agent_pid"`
	// BlockedCalls counts the tool calls the agent's hook blocked.
	BlockedCalls int    `json:"blocked_calls,omitempty"`
	Signal       string `json:"signal"`
	ExitCode     int    `json:"exit_code"`
	Time         string `json:"time"`
}

func (s *supervisor) finish(r result) {
	r.Status = "error"
	r.Session = s.sessionID
	r.AgentPID = s.agent.pid
	r.BlockedCalls = s.book.blockedCalls()
	r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	line, _ := json.Marshal(r)
	line = append(line, '\n')
	if s.opt.resultFile != "" {
		f, err := os.OpenFile(s.opt.resultFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			_, err = f.Write(line)
			_ = f.Sync()
			_ = f.Close()
		}
		if err != nil {
			s.log.Printf("writing --result-file: %v; result follows on stdout", err)
			_, _ = s.stdout.Write(line)
		}
	} else {
		_, _ = s.stdout.Write(line)
	}
	if s.opt.onKill != "" {
		ctx, cancel := context.WithTimeout(context.Background(), s.opt.hookTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.opt.onKill)
		cmd.Env = append(agentEnv(os.Environ(), s.sessionID, ""), envResult+"="+strings.TrimSpace(string(line)))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			s.log.Printf("clean-up hook: %v", err)
		}
	}
}

func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// run is main without os.Exit, so tests can drive it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	logger := log.New(stderr, "loopsupervisor: ", log.LstdFlags|log.Lmsgprefix)
	opt, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			logger.Print(err)
		}
		return exitUsage
	}
	keys, err := loadKeys(opt)
	if err != nil {
		logger.Print(err)
		return exitUsage
	}
	if err = checkLoopback(opt.listen); err != nil {
		logger.Print(err)
		return exitUsage
	}
	cred, err := agentCredential(opt.agentUser)
	if err != nil {
		logger.Print(err)
		return exitUsage
	}
	if err = hideProcEntries(); err != nil {
		logger.Printf("cannot make the supervisor non-dumpable (an agent of the same user may read its memory): %v", err)
	}
	if opt.instanceID == "" {
		opt.instanceID = newInstanceID()
	}
	ln, err := net.Listen("tcp", opt.listen)
	if err != nil {
		logger.Printf("listen: %v", err)
		return exitInternal
	}
	defer ln.Close()
	if opt.addrFile != "" {
		tmp := opt.addrFile + ".tmp"
		if err = os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err == nil {
			err = os.Rename(tmp, opt.addrFile)
		}
		if err != nil {
			logger.Printf("--addr-file: %v", err)
			return exitInternal
		}
	}
	if err = becomeSubreaper(); err != nil {
		logger.Printf("cannot become child subreaper (orphaned agent processes go to init): %v", err)
	}
	hostname, _ := os.Hostname()
	s := &supervisor{
		opt:       opt,
		log:       logger,
		verifier:  webhook.Verifier{Keys: keys, Tolerance: opt.tolerance},
		replay:    webhook.NewReplayCache(opt.replayWindow, 100_000),
		sessionID: opt.instanceID,
		hostname:  hostname,
		killReq:   make(chan webhook.Message, 1),
		stdout:    stdout,
	}
	s.book = newHookBook(opt.hookPatience, func(m webhook.Message) { s.kill(m) }, logger.Printf)
	hookToken := newUUID()
	mux := http.NewServeMux()
	mux.Handle("/kill", s)
	mux.Handle(hookPath, &hookHandler{token: []byte(hookToken), book: s.book, now: time.Now})

	sigCh := make(chan os.Signal, 1)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigCh)

	env := withExportDefaults(agentEnv(os.Environ(), opt.instanceID, opt.serviceName), opt.exportInterval)
	env = append(env, envHookURL+"=http://"+ln.Addr().String()+hookPath, envHookToken+"="+hookToken)
	a, err := startAgent(opt.argv, env, cred)
	if err != nil {
		logger.Printf("starting agent: %v", err)
		return exitInternal
	}
	s.agent = a
	logger.Printf("agent pid %d (process group %d), session %s, webhooks on http://%s", a.pid, a.pid, opt.instanceID, ln.Addr())

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, ErrorLog: logger}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(ln)
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		wg.Wait()
		s.hooks.Wait()
	}()

	var backstop <-chan time.Time
	if opt.backstop > 0 {
		t := time.NewTimer(opt.backstop)
		defer t.Stop()
		backstop = t.C
	}

	select {
	case <-a.leaderDone:
		code := exitCode(a.status)
		if safeGroup(a.pid) && groupAlive(a.pid) {
			logger.Printf("agent exited (%d) leaving processes in its group; stopping them", code)
			s.killing.Store(true)
			s.terminate()
		}
		logger.Printf("agent exited by itself with code %d; its hook blocked %d calls", code, s.book.blockedCalls())
		return code
	case msg := <-s.killReq:
		sig := s.terminate()
		s.finish(result{
			Kind: "loop_kill", Reason: msg.Body.Transition.Reason, Explanation: msg.Body.Transition.Explanation,
			LoopSession: msg.Body.Session.Key, EventID: msg.Body.ID, WebhookID: msg.WebhookID,
			DecidedAt: msg.Body.DecidedAt.UTC().Format(time.RFC3339Nano), Signal: sig, ExitCode: exitKilled,
		})
		return exitKilled
	case <-backstop:
		s.killing.Store(true)
		sig := s.terminate()
		s.finish(result{
			Kind: "backstop", Reason: "supervisor_backstop", Signal: sig, ExitCode: exitBackstop,
			Explanation: fmt.Sprintf("agent stopped by the supervisor's wall-clock backstop after %s", opt.backstop),
		})
		return exitBackstop
	case sg := <-sigCh:
		s.killing.Store(true)
		ssig, _ := sg.(syscall.Signal)
		sig := s.terminate()
		code := 128 + int(ssig)
		s.finish(result{
			Kind: "supervisor_signal", Reason: "interrupted", Signal: sig, ExitCode: code,
			Explanation: fmt.Sprintf("supervisor received %s and stopped the agent", sg),
		})
		return code
	case <-ctx.Done():
		s.killing.Store(true)
		sig := s.terminate()
		code := 128 + int(syscall.SIGTERM)
		s.finish(result{
			Kind: "supervisor_signal", Reason: "interrupted", Signal: sig, ExitCode: code,
			Explanation: "supervisor was cancelled and stopped the agent",
		})
		return code
	}
}
