package tlsguard

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

// otlp is a receivers section with one OTLP receiver whose protocol proto
// listens on endpoint, with tls when it is not nil.
func otlp(proto, endpoint string, tls map[string]any) map[string]any {
	p := map[string]any{"endpoint": endpoint}
	if tls != nil {
		p["tls"] = tls
	}
	return map[string]any{"otlp": map[string]any{"protocols": map[string]any{proto: p}}}
}

var cert = map[string]any{"cert_file": "/etc/tls/tls.crt", "key_file": "/etc/tls/tls.key"}

// TestPlaintextBeyondLoopbackIsRefused: a receiver listening beyond
// loopback starts only with a TLS certificate; loopback, a unix socket and
// the receiver's own default need none.
func TestPlaintextBeyondLoopbackIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		receivers map[string]any
		// wantErr is part of the error; "" when the config is accepted.
		wantErr string
	}{
		{"loopback v4", otlp("grpc", "127.0.0.1:4317", nil), ""},
		{"loopback v4, another address of 127/8", otlp("http", "127.1.2.3:4318", nil), ""},
		{"loopback v6", otlp("http", "[::1]:4318", nil), ""},
		{"localhost", otlp("grpc", "localhost:4317", nil), ""},
		{"the receiver's default", otlp("grpc", "", nil), ""},
		{"a pod address with tls", otlp("grpc", "10.1.2.3:4317", cert), ""},
		{"every interface with inline tls", otlp("http", "0.0.0.0:4318", map[string]any{"cert_pem": "-----BEGIN", "key_pem": "x"}), ""},
		{"a unix socket", map[string]any{"otlp": map[string]any{"protocols": map[string]any{"grpc": map[string]any{"endpoint": "/run/otlp.sock", "transport": "unix"}}}}, ""},
		{"a pod address in plaintext", otlp("grpc", "10.1.2.3:4317", nil),
			`receivers::otlp::protocols::grpc::endpoint: "10.1.2.3:4317" is beyond loopback and receivers::otlp::protocols::grpc::tls has no certificate`},
		{"every interface in plaintext", otlp("http", "0.0.0.0:4318", nil), `"0.0.0.0:4318" is beyond loopback`},
		{"no host: every interface", otlp("http", ":4318", nil), `":4318" is beyond loopback`},
		{"a host name", otlp("http", "collector.example:4318", nil), `"collector.example:4318" is beyond loopback`},
		{"tls without a certificate", otlp("grpc", "0.0.0.0:4317", map[string]any{"client_ca_file": "/ca.pem"}), "has no certificate"},
		{"a receiver's own endpoint", map[string]any{"zipkin": map[string]any{"endpoint": "0.0.0.0:9411"}}, `receivers::zipkin::endpoint: "0.0.0.0:9411" is beyond loopback`},
		{"an endpoint without a port", otlp("grpc", "0.0.0.0", nil), `receivers::otlp::protocols::grpc::endpoint: "0.0.0.0": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := confmap.NewFromStringMap(map[string]any{"receivers": tc.receivers})
			before := conf.ToStringMap()
			c := NewFactory().Create(confmap.ConverterSettings{Logger: zap.NewNop()})
			err := c.Convert(context.Background(), conf)
			assert.Equal(t, before, conf.ToStringMap(), "the converter changes nothing")
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestEveryPlaintextListenerIsNamed: each refused listener is reported, so
// one run of `validate` lists them all.
func TestEveryPlaintextListenerIsNamed(t *testing.T) {
	conf := confmap.NewFromStringMap(map[string]any{"receivers": map[string]any{
		"otlp": map[string]any{"protocols": map[string]any{
			"grpc": map[string]any{"endpoint": "0.0.0.0:4317"},
			"http": map[string]any{"endpoint": "0.0.0.0:4318"},
		}},
	}})
	err := NewFactory().Create(confmap.ConverterSettings{}).Convert(context.Background(), conf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "receivers::otlp::protocols::grpc::endpoint")
	assert.Contains(t, err.Error(), "receivers::otlp::protocols::http::endpoint")
}
