// Command e2e measures the otelcol-loop distribution end to end (BENCHMARKS.md,
// part 3): for each target rate it runs the collector twice, with and
// without loop_detect in the traces pipeline, feeds it with `loopagent
// --load` over OTLP/HTTP on loopback, samples the collector's CPU time and
// RSS from /proc while the load runs, and timestamps every kill webhook that
// alert_sink delivers to a local receiver standing in for the supervisor.
//
//	go run ./internal/benchdata/e2e -otelcol bin/otelcol-loop -agent bin/loopagent -out .bench/e2e.txt
//
// Latency reported: decided_at (loop_detect's decision, in the webhook body)
// → webhook received. The step before it, span arrival → decision, is
// synchronous in the receiver's request (no batch processor on the path);
// docs/latency.md measures it with a stamping proxy without load.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type receipt struct {
	at   time.Time
	body []byte
}

type receiver struct {
	mu sync.Mutex
	rs []receipt
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.rs = append(r.rs, receipt{at, b})
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"result":"killed"}`))
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const configTmpl = `
extensions:
  health_check:
    endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 1024
    spike_limit_mib: 256
  loop_detect:
    session:
      keys: [gen_ai.conversation.id]
    digest_key: bench-digest-key
    tick_interval: 250ms
exporters:
  alert_sink:
    kill:
      endpoint: http://127.0.0.1:%d/kill
      secrets: ["%s"]
      ttl: 30s
    timeout: 2s
service:
  extensions: [health_check]
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [%s]
      exporters: [alert_sink]
`

type sample struct {
	t     time.Time
	ticks int64 // utime+stime, clock ticks
	rss   int64 // bytes
}

func readProc(pid int) (sample, error) {
	s := sample{t: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the ")" of the command name: state is field 3; utime 14, stime 15.
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	f := strings.Fields(rest)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.ticks = ut + st
	st2, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(st2), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			s.rss = kb << 10
		}
	}
	return s, nil
}

type result struct {
	rate, sessions int
	variant        string
	achieved       float64
	cores          float64 // collector CPU time / wall time during the load
	rssMax, rssEnd float64 // MiB
	kills          int
	lat            []float64 // ms, decided_at → received
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(p*float64(len(s))+0.999999) - 1 // nearest rank
	return s[max(0, min(i, len(s)-1))]
}

// runOne measures one row: the collector with or without loop_detect fed
// by loopagent --load at rate.
func runOne(otelcol, agent string, rate, sessions int, dur time.Duration, withLoop bool) (result, error) {
	res := result{rate: rate, sessions: sessions, variant: "without"}
	procs := "memory_limiter"
	if withLoop {
		procs, res.variant = "memory_limiter, loop_detect", "with"
	}
	rcv := &receiver{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: rcv}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	health, otlp := freePort(), freePort()
	dir, err := os.MkdirTemp("", "otelcol-loop-e2e")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	cfg, err := writeConfig(dir, health, otlp, l.Addr().(*net.TCPAddr).Port, procs)
	if err != nil {
		return res, err
	}
	col := exec.Command(otelcol, "--config", cfg)
	col.Stdout, col.Stderr = os.Stderr, os.Stderr
	if err := col.Start(); err != nil {
		return res, err
	}
	defer stopCollector(col)
	if err := waitHealthy(health); err != nil {
		return res, err
	}
	agOut, err := runLoad(&res, col.Process.Pid, agent, otlp, rate, sessions, dur)
	if err != nil {
		return res, err
	}
	res.achieved = achievedRate(agOut)
	time.Sleep(2 * time.Second) // let the last kills arrive
	collectKills(rcv, &res)
	return res, nil
}

// writeConfig writes the collector's configuration into dir and returns
// its path: health check and OTLP/HTTP ports, kill webhook to
// webhookPort signed with a fixed secret, procs as the processors.
func writeConfig(dir string, health, otlp, webhookPort int, procs string) (string, error) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*7 + 1)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(configTmpl, health, otlp, webhookPort, secret, procs)), 0o600); err != nil {
		return "", err
	}
	return cfg, nil
}

// stopCollector sends SIGTERM and kills the collector if it has not exited
// 10 seconds later.
func stopCollector(col *exec.Cmd) {
	_ = col.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = col.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = col.Process.Kill()
	}
}

// waitHealthy polls the collector's health check for up to 20 seconds.
func waitHealthy(health int) error {
	up := time.Now().Add(20 * time.Second)
	for {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", health))
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(up) {
			return fmt.Errorf("collector not healthy")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runLoad runs loopagent --load against the collector's OTLP port while
// sampling the collector (pid) from /proc into res: its CPU cores and RSS.
// It returns the agent's output.
func runLoad(res *result, pid int, agent string, otlp, rate, sessions int, dur time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dur+60*time.Second)
	defer cancel()
	ag := exec.CommandContext(ctx, agent, "--load", "-q", "--protocol", "http",
		"--endpoint", fmt.Sprintf("127.0.0.1:%d", otlp),
		"--rate", strconv.Itoa(rate), "--sessions", strconv.Itoa(sessions),
		"--duration", dur.String(), "--loop-fraction", "0.1", "--seed", "7")
	var agOut bytes.Buffer
	ag.Stdout, ag.Stderr = &agOut, os.Stderr
	first, err := readProc(pid)
	if err != nil {
		return "", err
	}
	if err := ag.Start(); err != nil {
		return "", err
	}
	agDone := make(chan error, 1)
	go func() { agDone <- ag.Wait() }()
	var last sample
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-agDone:
			if err != nil {
				return "", fmt.Errorf("loopagent: %v: %s", err, agOut.String())
			}
			break wait
		case <-tick.C:
			s, err := readProc(pid)
			if err == nil {
				last = s
				res.rssMax = max(res.rssMax, float64(s.rss)/(1<<20))
			}
		}
	}
	if s, err := readProc(pid); err == nil {
		last = s
	}
	res.cores = float64(last.ticks-first.ticks) / 100 / last.t.Sub(first.t).Seconds()
	res.rssEnd = float64(last.rss) / (1 << 20)
	return agOut.String(), nil
}

// achievedRate reads the achieved span rate from loopagent's result line.
func achievedRate(agOut string) float64 {
	var st struct {
		AchievedRate float64 `json:"achieved_rate"`
	}
	for _, line := range strings.Split(agOut, "\n") {
		if strings.Contains(line, "achieved_rate") {
			_ = json.Unmarshal([]byte(line), &st)
		}
	}
	return st.AchievedRate
}

// collectKills counts the kill webhooks received and their latency,
// decided_at to received.
func collectKills(rcv *receiver, res *result) {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, r := range rcv.rs {
		var body struct {
			DecidedAt time.Time `json:"decided_at"`
			Event     struct {
				DecidedAt time.Time `json:"decided_at"`
			} `json:"event"`
		}
		if json.Unmarshal(r.body, &body) != nil {
			continue
		}
		d := body.DecidedAt
		if d.IsZero() {
			d = body.Event.DecidedAt
		}
		if d.IsZero() {
			continue
		}
		res.kills++
		res.lat = append(res.lat, float64(r.at.Sub(d).Microseconds())/1000)
	}
}

func main() {
	otelcol := flag.String("otelcol", "bin/otelcol-loop", "collector binary")
	agent := flag.String("agent", "bin/loopagent", "loopagent binary")
	rates := flag.String("rates", "10000,50000", "target span rates")
	sessions := flag.Int("sessions", 500, "concurrent agent sessions")
	dur := flag.Duration("duration", 20*time.Second, "load duration per run")
	out := flag.String("out", ".bench/e2e.txt", "result file")
	flag.Parse()
	var b strings.Builder
	fmt.Fprintf(&b, "| target spans/s | achieved | loop_detect | collector CPU (cores) | RSS max / end (MiB) | kills | decided → webhook median / p99 (ms) |\n|---|---|---|---|---|---|---|\n")
	for _, rs := range strings.Split(*rates, ",") {
		rate, err := strconv.Atoi(strings.TrimSpace(rs))
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: bad rate", rs)
			os.Exit(2)
		}
		var cpu [2]float64
		for i, with := range []bool{false, true} {
			r, err := runOne(*otelcol, *agent, rate, *sessions, *dur, with)
			if err != nil {
				fmt.Fprintln(os.Stderr, "e2e:", err)
				os.Exit(1)
			}
			cpu[i] = r.cores
			line := fmt.Sprintf("| %d | %.0f | %s | %.3f | %.0f / %.0f | %d | %.2f / %.2f |\n",
				r.rate, r.achieved, r.variant, r.cores, r.rssMax, r.rssEnd, r.kills, pct(r.lat, 0.5), pct(r.lat, 0.99))
			fmt.Print(line)
			b.WriteString(line)
		}
		fmt.Fprintf(&b, "\nAt %d spans/s, collector CPU with/without loop_detect: %.2f×.\n\n", rate, cpu[1]/cpu[0])
		if rate != 0 {
			b.WriteString("| target spans/s | achieved | loop_detect | collector CPU (cores) | RSS max / end (MiB) | kills | decided → webhook median / p99 (ms) |\n|---|---|---|---|---|---|---|\n")
		}
	}
	s := strings.TrimSuffix(b.String(), "| target spans/s | achieved | loop_detect | collector CPU (cores) | RSS max / end (MiB) | kills | decided → webhook median / p99 (ms) |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(os.Stdout, "%s", s)
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err == nil {
		_ = os.WriteFile(*out, []byte(s), 0o644)
	}
}
