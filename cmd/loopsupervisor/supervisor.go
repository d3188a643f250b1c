//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"
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

// run is main without os.Exit, so tests can drive it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	logger := log.New(stderr, "loopsupervisor: ", log.LstdFlags|log.Lmsgprefix)
	opt, keys, cred, code := configure(args, stderr, logger)
	if code != 0 {
		return code
	}
	ln, err := listen(opt)
	if err != nil {
		logger.Print(err)
		return exitInternal
	}
	defer ln.Close()
	if err = becomeSubreaper(); err != nil {
		logger.Printf("cannot become child subreaper (orphaned agent processes go to init): %v", err)
	}
	s := newSupervisor(opt, keys, logger, stdout)
	hookToken := newUUID()
	mux := http.NewServeMux()
	mux.Handle("/kill", s)
	mux.Handle(hookPath, &hookHandler{token: []byte(hookToken), book: s.book, now: time.Now})
	mux.Handle(hookPath+"/claude", &hookHandler{token: []byte(hookToken), book: s.book, now: time.Now, format: formatClaude})

	sigCh := make(chan os.Signal, 1)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigCh)

	env := withExportDefaults(agentEnv(os.Environ(), opt.instanceID, opt.serviceName), opt.exportInterval)
	env = withRoute(env, ln.Addr().String())
	env = withInstanceAttr(env, opt.instanceID)
	if !opt.noAgentTelemetry {
		env = withClaudeTelemetry(env, opt.argv)
	}
	env = append(env, envHookURL+"=http://"+ln.Addr().String()+hookPath, envHookToken+"="+hookToken)
	a, err := startAgent(opt.argv, env, cred)
	if err != nil {
		logger.Printf("starting agent: %v", err)
		return exitInternal
	}
	s.agent = a
	logger.Printf("agent pid %d (process group %d), session %s, webhooks on http://%s", a.pid, a.pid, opt.instanceID, ln.Addr())
	defer s.serve(ln, mux)()
	stopWatch := s.watchAgent(env, ln.Addr().String(), time.Now())
	defer stopWatch()
	return s.wait(ctx, sigCh)
}

// configure reads the flags and everything they name, and hardens the
// process; a non-zero code is the exit code of a refusal (the reason is
// logged).
func configure(args []string, stderr io.Writer, logger *log.Logger) (options, [][]byte, *syscall.Credential, int) {
	opt, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			logger.Print(err)
		}
		return opt, nil, nil, exitUsage
	}
	keys, err := loadKeys(opt)
	if err == nil {
		err = checkLoopback(opt.listen)
	}
	var cred *syscall.Credential
	if err == nil {
		cred, err = agentCredential(opt.agentUser)
	}
	if err != nil {
		logger.Print(err)
		return opt, nil, nil, exitUsage
	}
	if err = hideProcEntries(); err != nil {
		logger.Printf("cannot make the supervisor non-dumpable (an agent of the same user may read its memory): %v", err)
	}
	if opt.instanceID == "" {
		opt.instanceID = newInstanceID()
	}
	return opt, keys, cred, 0
}

// listen opens the webhook port and, with --addr-file, says where.
func listen(opt options) (net.Listener, error) {
	ln, err := net.Listen("tcp", opt.listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if opt.addrFile != "" {
		tmp := opt.addrFile + ".tmp"
		if err = os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err == nil {
			err = os.Rename(tmp, opt.addrFile)
		}
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("--addr-file: %w", err)
		}
	}
	return ln, nil
}

func newSupervisor(opt options, keys [][]byte, logger *log.Logger, stdout io.Writer) *supervisor {
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
		watch:     &watch{},
	}
	s.book = newHookBook(opt.hookPatience, func(m webhook.Message) { s.kill(m) }, logger.Printf)
	s.book.onCall = s.watch.toolCall
	return s
}

// watchAgent says once, in one line, when the collector has not announced
// the agent in time (watch.overdue); the returned stop ends the check.
func (s *supervisor) watchAgent(env []string, listen string, started time.Time) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if s.watch.overdue(started, now) {
					s.log.Print(unwatchedLine(env, s.opt.argv, listen, s.book.sawCall()))
				}
			}
		}
	}()
	return func() { close(done) }
}

// serve answers webhooks and hook queries on ln until the returned stop is
// called, which also waits for running --on-warn commands.
func (s *supervisor) serve(ln net.Listener, h http.Handler) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, ErrorLog: s.log}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(ln)
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		wg.Wait()
		s.hooks.Wait()
	}
}

// wait waits for whatever ends the run first: the agent's own exit, a
// verified kill, the backstop, a signal or ctx; it stops the agent where
// needed, writes the result line and returns the exit code.
func (s *supervisor) wait(ctx context.Context, sigCh <-chan os.Signal) int {
	var backstop <-chan time.Time
	if s.opt.backstop > 0 {
		t := time.NewTimer(s.opt.backstop)
		defer t.Stop()
		backstop = t.C
	}
	select {
	case <-s.agent.leaderDone:
		return s.agentExited()
	case msg := <-s.killReq:
		sig := s.terminate()
		s.finish(result{
			Kind: "loop_kill", Reason: msg.Body.Transition.Reason, Explanation: msg.Body.Transition.Explanation,
			LoopSession: msg.Body.Session.Key, EventID: msg.Body.ID, WebhookID: msg.WebhookID,
			DecidedAt: msg.Body.DecidedAt.UTC().Format(time.RFC3339Nano), Signal: sig, ExitCode: exitKilled,
		})
		return exitKilled
	case <-backstop:
		return s.stop("backstop", "supervisor_backstop", exitBackstop,
			fmt.Sprintf("agent stopped by the supervisor's wall-clock backstop after %s", s.opt.backstop))
	case sg := <-sigCh:
		ssig, _ := sg.(syscall.Signal)
		return s.stop("supervisor_signal", "interrupted", 128+int(ssig), fmt.Sprintf("supervisor received %s and stopped the agent", sg))
	case <-ctx.Done():
		return s.stop("supervisor_signal", "interrupted", 128+int(syscall.SIGTERM), "supervisor was cancelled and stopped the agent")
	}
}

// agentExited stops what the agent left in its group and returns the
// agent's own exit code; no result line is written.
func (s *supervisor) agentExited() int {
	a := s.agent
	code := exitCode(a.status)
	if safeGroup(a.pid) && groupAlive(a.pid) {
		s.log.Printf("agent exited (%d) leaving processes in its group; stopping them", code)
		s.killing.Store(true)
		s.terminate()
	}
	s.log.Printf("agent exited by itself with code %d; its hook blocked %d calls; watched: %t", code, s.book.blockedCalls(), s.watch.watched())
	return code
}

// stop stops the agent for a reason of the supervisor's own (not a kill)
// and writes the result line.
func (s *supervisor) stop(kind, reason string, code int, explanation string) int {
	s.killing.Store(true)
	sig := s.terminate()
	s.finish(result{Kind: kind, Reason: reason, Signal: sig, ExitCode: code, Explanation: explanation})
	return code
}
