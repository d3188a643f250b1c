package config_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/deploygen"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// envRef is a ${env:X} or ${env:X:-default} reference.
var envRef = regexp.MustCompile(`\$\{env:[A-Za-z0-9_]+(?::-([^}]*))?\}`)

// defaultHost is the host of an endpoint with every ${env:X:-default}
// expanded to its default ("" when a reference has none or no host results).
func defaultHost(endpoint string) string {
	missing := false
	e := envRef.ReplaceAllStringFunc(endpoint, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		if !strings.Contains(ref, ":-") {
			missing = true
		}
		return m[1]
	})
	h, _, err := net.SplitHostPort(e)
	if missing || err != nil {
		return ""
	}
	return h
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TestNetworkListenersServeTLS: in every shipped configuration, an OTLP
// receiver that listens beyond loopback (by its default address) serves
// TLS with a certificate and key, so bearer tokens and spans never cross a
// network in the clear; and a gateway sends to tier 2 over TLS checked
// against a CA, unless every tier-2 address it defaults to is loopback.
func TestNetworkListenersServeTLS(t *testing.T) {
	tlsReceivers := 0
	for name, text := range shippedConfigs(t) {
		cfg := decodeYAML(t, name, text)
		for id, r := range deploygen.Get(cfg, "receivers").(deploygen.Obj) {
			if !strings.HasPrefix(id, "otlp") {
				continue
			}
			for proto, p := range deploygen.Get(r, "protocols").(deploygen.Obj) {
				ep := deploygen.Str(p, "endpoint")
				host := defaultHost(ep)
				if host == "" {
					t.Errorf("%s: receivers::%s::protocols::%s::endpoint %q has no default host", name, id, proto, ep)
					continue
				}
				if isLoopback(host) {
					continue
				}
				if loopbackOnly[name] {
					t.Errorf("%s is listed as loopback-only but listens on %s", name, ep)
				}
				tlsReceivers++
				if deploygen.Str(p, "tls", "cert_file") == "" || deploygen.Str(p, "tls", "key_file") == "" {
					t.Errorf("%s: receivers::%s::protocols::%s listens on %s without tls.cert_file and tls.key_file", name, id, proto, ep)
				}
			}
		}
		lb := deploygen.Get(cfg, "exporters", "load_balancing")
		if lb == nil {
			continue
		}
		tlsCfg := deploygen.Get(lb, "protocol", "otlp", "tls")
		remote := deploygen.Get(lb, "resolver", "static") == nil
		for _, h := range deploygen.List(lb, "resolver", "static", "hostnames") {
			if s, _ := h.(string); !isLoopback(defaultHost(s)) {
				remote = true
			}
		}
		switch {
		case !remote && deploygen.Get(tlsCfg, "insecure") == true:
			// Plain gRPC to instances on this machine only.
		case deploygen.Get(tlsCfg, "insecure") == true:
			t.Errorf("%s: load_balancing sends to tier 2 across the network with tls.insecure", name)
		case deploygen.Str(tlsCfg, "ca_file") == "" || deploygen.Str(tlsCfg, "server_name_override") == "":
			t.Errorf("%s: load_balancing checks tier 2's certificate against no ca_file / server_name_override: %v", name, tlsCfg)
		}
	}
	// container.yaml (2), gateway-dns and gateway-k8s (2 each), tier 2 (1).
	if tlsReceivers < 7 {
		t.Errorf("found %d OTLP receivers beyond loopback, want at least 7", tlsReceivers)
	}
}

// TestContainerServesTLSOnly starts config/container.yaml with the built
// collector: with a certificate and key mounted it answers OTLP/HTTP over
// TLS only (a plaintext request is refused, the token never accepted in the
// clear); without them it does not start.
func TestContainerServesTLSOnly(t *testing.T) {
	bin := otelcolBinary(t)
	cfg, _ := filepath.Abs("container.yaml")
	dir := t.TempDir()
	const token = "test-otlp-token-0123456789abcdef"
	start := func(t *testing.T, name string, extra ...string) (*testproc.Proc, int, int) {
		grpcPort, httpPort, health, metrics := testproc.FreePort(t), testproc.FreePort(t), testproc.FreePort(t), testproc.FreePort(t)
		env := append([]string{
			fmt.Sprintf("LOOP_OTLP_GRPC_ENDPOINT=127.0.0.1:%d", grpcPort),
			fmt.Sprintf("LOOP_OTLP_HTTP_ENDPOINT=127.0.0.1:%d", httpPort),
			fmt.Sprintf("LOOP_HEALTH_ENDPOINT=127.0.0.1:%d", health),
			"LOOPDETECT_STORAGE_DIR=" + t.TempDir(),
		}, testEnv...)
		env = append(env, "LOOP_OTLP_TOKEN="+token)
		env = append(env, extra...)
		override := fmt.Sprintf("yaml:service::telemetry::metrics::readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", metrics)
		p := testproc.Start(t, dir, name, env, "", bin, "--config=file:"+cfg, "--config="+override)
		p.LogTail = 4000
		return p, httpPort, health
	}

	t.Run("without a certificate it does not start", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "absent")
		p, _, _ := start(t, "container-no-cert", "LOOP_TLS_CERT_FILE="+missing+"/tls.crt", "LOOP_TLS_KEY_FILE="+missing+"/tls.key")
		if code := p.Wait(t, 60*time.Second); code == 0 {
			t.Fatalf("the collector exited 0 without its TLS certificate; log:\n%s", p.LogText())
		}
		if !strings.Contains(p.LogText(), "TLS") {
			t.Errorf("the start-up error does not mention TLS:\n%s", testproc.Tail(p.LogText(), 2000))
		}
	})

	t.Run("with a certificate it serves TLS only", func(t *testing.T) {
		certFile, keyFile := testproc.SelfSignedCert(t, t.TempDir(), "127.0.0.1")
		p, httpPort, health := start(t, "container-tls", "LOOP_TLS_CERT_FILE="+certFile, "LOOP_TLS_KEY_FILE="+keyFile)
		p.WaitHealthy(t, health, 60*time.Second)

		pem, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		plain := &http.Client{Timeout: 10 * time.Second}
		post := func(c *http.Client, scheme string) (int, error) {
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s://127.0.0.1:%d/v1/traces", scheme, httpPort), strings.NewReader(`{"resourceSpans":[]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := c.Do(req)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		if code, err := post(tlsClient, "https"); err != nil || code != http.StatusOK {
			t.Errorf("OTLP/HTTP over TLS with the token: %d, %v; want 200", code, err)
		}
		if code, err := post(plain, "http"); err == nil && code == http.StatusOK {
			t.Errorf("OTLP/HTTP in plaintext was accepted (200)")
		}
	})
}
