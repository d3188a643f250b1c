//go:build unix

package main

// The agent process: its environment (secrets out, instance id and export
// delays in), its process group, reaping, and stopping it.

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// signalGroup sends sig to every process of group pgid. Tests wrap it to
// count signals.
var signalGroup = func(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }

// secretEnv names the variables the agent must not inherit: the
// supervisor's secrets, and the collector's kill and alerts signing
// secrets, digest key and tier-2 token, which the shell that starts the
// supervisor may also hold (the collector's configs read them). The agent's
// own OTLP token (LOOP_OTLP_TOKEN, OTEL_EXPORTER_OTLP_HEADERS) stays: it is
// how the agent reports.
var secretEnv = map[string]bool{
	envSecrets:                       true,
	"LOOPDETECT_WEBHOOK_SECRET":      true,
	"LOOPDETECT_WEBHOOK_SECRET_NEXT": true,
	"LOOPDETECT_ALERTS_SECRET":       true,
	"LOOPDETECT_DIGEST_KEY":          true,
	"LOOP_TIER2_TOKEN":               true,
}

// agentEnv is base with the secrets of secretEnv removed, the instance id
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
		if secretEnv[k] {
			continue
		}
		switch k {
		case envSessionID, envHookURL, envHookToken:
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

// routeAttr is the resource attribute by which the agent names its
// supervisor's address, so that a collector with several supervisors
// (alert_sink's kill.only_named_agents) sends its notices only here.
const routeAttr = "loopsupervisor.listen"

// withRoute names listen as the agent's supervisor in the agent's
// OTEL_RESOURCE_ATTRIBUTES (agentEnv put one there), replacing an
// inherited one.
func withRoute(env []string, listen string) []string {
	return withResourceAttr(env, routeAttr, listen)
}

// withResourceAttr sets key=value in the agent's OTEL_RESOURCE_ATTRIBUTES,
// replacing an inherited value of key.
func withResourceAttr(env []string, key, value string) []string {
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "OTEL_RESOURCE_ATTRIBUTES=")
		if !ok {
			continue
		}
		var parts []string
		for _, p := range strings.Split(v, ",") {
			if k, _, _ := strings.Cut(p, "="); strings.TrimSpace(k) != key {
				parts = append(parts, p)
			}
		}
		env[i] = "OTEL_RESOURCE_ATTRIBUTES=" + strings.Join(append(parts, key+"="+value), ",")
	}
	return env
}

// instanceAttr repeats the agent's service.instance.id in its resource
// under a name of our own: an agent that overwrites service.instance.id
// (OpenCode 1.18.33 sets a random run id of its own after reading
// OTEL_RESOURCE_ATTRIBUTES) keeps this one, and the collector reads it in
// its place, so a kill still names the id we accept.
const instanceAttr = "loopsupervisor.instance.id"

// withInstanceAttr adds instanceAttr=id to the agent's
// OTEL_RESOURCE_ATTRIBUTES (agentEnv put one there), replacing an
// inherited one.
func withInstanceAttr(env []string, id string) []string {
	return withResourceAttr(env, instanceAttr, id)
}

// exportDelayVars are the OTel SDK settings that hold an agent's finished
// spans and log records before export: the batch span and log record
// processors' delays (OTel SDKs) and Claude Code's own logs and traces
// intervals (its traces beta reads OTEL_TRACES_EXPORT_INTERVAL, not the
// SDK's variable). Each defaults to 5 s, which is how late every verdict
// would be.
var exportDelayVars = []string{"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BLRP_SCHEDULE_DELAY", "OTEL_LOGS_EXPORT_INTERVAL", "OTEL_TRACES_EXPORT_INTERVAL"}

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
		Sys:   agentProcAttr(cred),
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

func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
