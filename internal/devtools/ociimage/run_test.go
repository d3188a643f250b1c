//go:build linux && amd64

package ociimage_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// ports are the loopback ports one run of a baked configuration listens on.
type ports struct{ grpc, http, health, metrics int }

// runEnv is, per image, the environment that moves its baked configuration
// onto free loopback ports and gives it what it requires, the way a user
// does with `docker run -e`. tmp is a scratch directory.
var runEnv = map[string]func(t *testing.T, p ports, tmp string) []string{
	"otelcol-loop": func(t *testing.T, p ports, tmp string) []string {
		// The receivers serve TLS only: the files a user mounts.
		cert, key := testproc.SelfSignedCert(t, t.TempDir(), "127.0.0.1")
		return []string{
			"LOOP_TLS_CERT_FILE=" + cert,
			"LOOP_TLS_KEY_FILE=" + key,
			fmt.Sprintf("LOOP_OTLP_GRPC_ENDPOINT=127.0.0.1:%d", p.grpc),
			fmt.Sprintf("LOOP_OTLP_HTTP_ENDPOINT=127.0.0.1:%d", p.http),
			fmt.Sprintf("LOOP_HEALTH_ENDPOINT=127.0.0.1:%d", p.health),
			"LOOP_METRICS_HOST=127.0.0.1",
			"LOOPDETECT_STORAGE_DIR=" + filepath.Join(tmp, "queue"),
			"LOOPDETECT_WEBHOOK_SECRET=" + testproc.NewSecret(t),
			"LOOPDETECT_DIGEST_KEY=test-digest-key",
			"LOOP_OTLP_TOKEN=image-test-otlp-token-0123456789",
			// Nothing listens there: starting does not call the supervisor.
			fmt.Sprintf("SUPERVISOR_KILL_URL=http://127.0.0.1:%d/kill", testproc.FreePort(t)),
		}
	},
	"otelcol-loop-gateway": func(t *testing.T, p ports, tmp string) []string {
		cert, key := testproc.SelfSignedCert(t, t.TempDir(), "127.0.0.1")
		return []string{
			"LOOP_GATEWAY_TLS_CERT_FILE=" + cert,
			"LOOP_GATEWAY_TLS_KEY_FILE=" + key,
			// Tier 2's CA: any certificate will do, nothing answers there.
			"LOOP_TIER2_CA_FILE=" + cert,
			fmt.Sprintf("LOOP_GATEWAY_GRPC_ENDPOINT=127.0.0.1:%d", p.grpc),
			fmt.Sprintf("LOOP_GATEWAY_HTTP_ENDPOINT=127.0.0.1:%d", p.http),
			"LOOP_OTLP_TOKEN=image-test-otlp-token-0123456789",
			"LOOP_TIER2_TOKEN=image-test-tier2-token-0123456789",
			fmt.Sprintf("LOOP_GATEWAY_HEALTH_ENDPOINT=127.0.0.1:%d", p.health),
			"LOOP_GATEWAY_METRICS_HOST=127.0.0.1",
			"LOOP_TIER2_DNS_NAME=localhost",
		}
	},
}

// TestAmd64BinaryRunsBakedConfig: the linux/amd64 binary and the
// configuration taken from each image's layers pass `validate`, then start
// (on free loopback ports) and answer the health check.
func TestAmd64BinaryRunsBakedConfig(t *testing.T) {
	_, _, sum := images(t)
	amd64 := imagebuild.Platform{OS: "linux", Arch: "amd64"}
	for _, b := range sum.Images {
		t.Run(b.Name, func(t *testing.T) {
			env, ok := runEnv[b.Name]
			if !ok {
				t.Fatalf("no run environment for image %s: add one to runEnv", b.Name)
			}
			im, err := imagebuild.Lookup(b.Name)
			if err != nil {
				t.Fatal(err)
			}
			fs := files(t, platformImage(t, index(t, b), amd64))
			tmp := t.TempDir()
			bin := filepath.Join(tmp, b.Name)
			cfg := filepath.Join(tmp, "config.yaml")
			if err := os.WriteFile(bin, fs[im.BinaryPath()].body, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, fs[im.ConfigPath()].body, 0o644); err != nil {
				t.Fatal(err)
			}
			p := ports{testproc.FreePort(t), testproc.FreePort(t), testproc.FreePort(t), testproc.FreePort(t)}
			e := env(t, p, tmp)
			// The own-metrics port is fixed in the configurations (8888, the
			// collector's convention); move it the way a user overrides any
			// key: a second --config merged over the first.
			override := fmt.Sprintf("yaml:service::telemetry::metrics::readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", p.metrics)

			cmd := exec.Command(bin, "validate", "--config=file:"+cfg, "--config="+override)
			cmd.Env = append(os.Environ(), e...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s validate (baked configuration): %v\n%s", b.Name, err, out)
			}
			proc := testproc.Start(t, tmp, b.Name, e, "", bin, "--config=file:"+cfg, "--config="+override)
			proc.LogTail = 4000
			proc.WaitHealthy(t, p.health, 60*time.Second)
			proc.Stop(t, 10*time.Second)
		})
	}
}
