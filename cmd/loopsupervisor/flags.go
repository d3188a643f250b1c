//go:build unix

package main

// Flags, secrets and the instance id: everything the supervisor reads before it
// starts the agent, and refuses when it is unsafe.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

type options struct {
	listen     string
	addrFile   string
	secretFile string
	allowEnv   bool
	agentUser  string
	resultFile string
	onKill     string
	onWarn     string
	instanceID string
	// instanceIDFlag is a --instance-id given on the command line, which is
	// refused: every local user reads it in ps.
	instanceIDFlag string
	instanceIDFile string
	serviceName    string
	grace          time.Duration
	backstop       time.Duration
	tolerance      time.Duration
	replayWindow   time.Duration
	hookTimeout    time.Duration
	// hookPatience is how many of a loop's calls the agent's hook blocks
	// while a verified kill is held (--hook-patience).
	hookPatience int
	// exportInterval is the agent's telemetry export delay set by default
	// (--export-interval; 0 leaves the agent's SDK defaults).
	exportInterval time.Duration
	// noAgentTelemetry leaves a Claude Code agent's telemetry variables
	// alone (--no-agent-telemetry).
	noAgentTelemetry bool
	argv             []string
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
	fs.StringVar(&o.instanceIDFile, "instance-id-file", "", fmt.Sprintf("file holding the session / service.instance.id to give the agent (mode 0600); the only key a kill is accepted for, so it must be unguessable (at least %d characters, random-looking; default: a random UUID)", minInstanceIDLen))
	fs.StringVar(&o.instanceIDFlag, "instance-id", "", "refused: an id on the command line is readable by every local user (ps); use --instance-id-file")
	fs.StringVar(&o.serviceName, "service-name", "", "set OTEL_SERVICE_NAME for the agent (default: not set, so the name the agent gives itself stands)")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL to the agent's process group")
	fs.DurationVar(&o.backstop, "backstop", 2*time.Hour, "wall-clock limit for the agent (0 disables)")
	fs.DurationVar(&o.tolerance, "timestamp-tolerance", 5*time.Minute, "accepted distance of webhook-timestamp from now")
	fs.DurationVar(&o.replayWindow, "replay-window", 15*time.Minute, "how long webhook ids are remembered (must cover the timestamp window and the kill retry horizon)")
	fs.DurationVar(&o.hookTimeout, "hook-timeout", 30*time.Second, "time limit of the clean-up hook")
	fs.IntVar(&o.hookPatience, "hook-patience", 2, "when the agent runs `loopsupervisor hook`: how many of a loop's calls it blocks with the nudge while a verified kill waits; the next one carries the kill out (0: kills at once)")
	fs.DurationVar(&o.exportInterval, "export-interval", 200*time.Millisecond, "export delay given to the agent's OTel SDK (OTEL_BSP_SCHEDULE_DELAY, OTEL_BLRP_SCHEDULE_DELAY, OTEL_LOGS_EXPORT_INTERVAL, OTEL_TRACES_EXPORT_INTERVAL) unless the environment sets them; their 5 s defaults delay every verdict by up to 5 s (0 keeps the SDK's defaults)")
	fs.BoolVar(&o.noAgentTelemetry, "no-agent-telemetry", false, "do not set Claude Code's telemetry variables ("+strings.Join(claudeTelemetry, ", ")+") where the environment leaves them unset, for an agent command named claude")
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
	if o.instanceIDFlag != "" {
		return o, errors.New("--instance-id: the id is the kill capability and a command line is readable by every local user (ps, /proc/<pid>/cmdline); put it in a file (mode 0600) and use --instance-id-file, or leave both out for a random UUID")
	}
	if o.instanceIDFile != "" {
		id, err := readInstanceID(o.instanceIDFile)
		if err != nil {
			return o, err
		}
		o.instanceID = id
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
// it can sign kills. Its owner must be the supervisor's user or root: the
// owner can change the mode and read it, so a file of the agent's user
// (--agent-user) would hand the agent the secret whatever its mode.
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
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, neither the supervisor's user (%d) nor root: its owner can read it whatever its mode; chown it to the supervisor's user", st.Uid, os.Geteuid())
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

// readInstanceID reads --instance-id-file: one line, private like the
// secrets file, and an id checkInstanceID accepts.
func readInstanceID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--instance-id-file: %w", err)
	}
	defer f.Close()
	if err := checkPrivate(f); err != nil {
		return "", fmt.Errorf("--instance-id-file %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("--instance-id-file: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if err := checkInstanceID(id); err != nil {
		return "", fmt.Errorf("--instance-id-file %s: %w", path, err)
	}
	return id, nil
}

// minIDEntropyBits is the least estimated entropy of an instance id of
// one's own (a random UUID estimates about 130 bits, 16 random hex digits
// about 50).
const minIDEntropyBits = 40

// checkInstanceID refuses ids that are short, break OTEL_RESOURCE_ATTRIBUTES
// (a comma, an equals sign, a percent sign, a quote or a blank) or are
// obviously patterned: a character repeated or a constant step between
// neighbours for more than half the id (aaaa…, 0123…), a shorter block
// repeated over more than half of it (abcdabcd…, agentagent…), or under minIDEntropyBits by the id's own character
// frequencies. No check tells a random id from a guessable one; these
// catch the ids a person types.
func checkInstanceID(id string) error {
	if len(id) < minInstanceIDLen {
		return fmt.Errorf("instance id: at least %d characters: kills are accepted for this id alone, so it must not be guessable", minInstanceIDLen)
	}
	if len(id) > 256 {
		return errors.New("instance id: at most 256 characters")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`,=%;"\`, c) >= 0 {
			return fmt.Errorf("instance id: only printable ASCII without blanks or any of , = %% ; \" \\ (it goes into OTEL_RESOURCE_ATTRIBUTES)")
		}
	}
	steps := map[byte]int{}
	most := 0
	for i := 1; i < len(id); i++ {
		d := id[i] - id[i-1]
		steps[d]++
		most = max(most, steps[d])
	}
	if 2*most > len(id)-1 {
		return errors.New("instance id: patterned (a repeated character or a constant step); use a random one (uuidgen) or leave it to the supervisor")
	}
	for p := 1; p <= len(id)/2; p++ {
		same := 0
		for i := p; i < len(id); i++ {
			if id[i] == id[i-p] {
				same++
			}
		}
		if 2*same > len(id)-p {
			return errors.New("instance id: a repeated block; use a random one (uuidgen) or leave it to the supervisor")
		}
	}
	var freq [256]int
	for i := 0; i < len(id); i++ {
		freq[id[i]]++
	}
	bits := 0.0
	for _, n := range freq {
		if n > 0 {
			p := float64(n) / float64(len(id))
			bits -= float64(n) * math.Log2(p)
		}
	}
	if bits < minIDEntropyBits {
		return fmt.Errorf("instance id: too little variety (about %.0f bits, want %d); use a random one (uuidgen) or leave it to the supervisor", bits, minIDEntropyBits)
	}
	return nil
}

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
