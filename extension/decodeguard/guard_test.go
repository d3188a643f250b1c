package decodeguard

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-loop/otelcol-loop/extension/decodeguard/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/extension/decodeguard/internal/metadatatest"
)

// server runs confighttp with the guard as its middleware in front of a
// handler that reads the whole body as the OTLP receiver does and answers
// 400 with the read error's text.
func server(t *testing.T, maxDepth int, maxBody int64) (url string, tel *componenttest.Telemetry) {
	t.Helper()
	tel = componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := createDefaultConfig()
	cfg.MaxDepth = maxDepth
	ext, err := NewFactory().Create(context.Background(), metadatatest.NewSettings(tel), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })

	id := component.MustNewID("decode_guard")
	sc := confighttp.NewDefaultServerConfig()
	sc.NetAddr.Endpoint = "127.0.0.1:0"
	sc.MaxRequestBodySize = maxBody
	sc.Middlewares = []configmiddleware.Config{{ID: id}}
	ln, err := sc.ToListener(context.Background())
	require.NoError(t, err)
	srv, err := sc.ToServer(context.Background(), map[component.ID]component.Component{id: ext}, componenttest.NewNopTelemetrySettings(),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
			}
		}))
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	// Shutdown, not Close: a connection whose request was refused before its
	// body was read lingers (net/http waits for the client to stop writing),
	// and the package's leak check must not find it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().(*net.TCPAddr).String() + "/v1/traces", tel
}

func post(t *testing.T, url, contentType string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// deep is JSON nested n levels deep: objects holding arrays.
func deep(n int) []byte {
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			b.WriteString(`{"a":`)
		} else {
			b.WriteString(`[`)
		}
	}
	b.WriteString(`1`)
	for i := n - 1; i >= 0; i-- {
		if i%2 == 0 {
			b.WriteString(`}`)
		} else {
			b.WriteString(`]`)
		}
	}
	return []byte(b.String())
}

func refused(reason string, n int64) []metricdata.DataPoint[int64] {
	return []metricdata.DataPoint[int64]{{Attributes: attribute.NewSet(attribute.String("reason", reason)), Value: n}}
}

func TestDeepJSONIsRefused(t *testing.T) {
	url, tel := server(t, 8, 1<<20)
	code, msg := post(t, url, "application/json", deep(8))
	require.Equal(t, http.StatusOK, code, msg)
	code, msg = post(t, url, "application/json; charset=utf-8", deep(9))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, msg, "JSON nested deeper than 8 levels (decode_guard max_depth)")
	// A million levels end at the ninth: the rest is never read.
	code, _ = post(t, url, "application/json", deep(1_000_000))
	require.Equal(t, http.StatusBadRequest, code)
	metadatatest.AssertEqualDecodeguardRequestsRefused(t, tel, refused("depth", 2), metricdatatest.IgnoreTimestamp())
}

// TestBracketsInStringsDoNotCount: brackets inside strings, escaped quotes
// and escaped backslashes before a closing quote are followed as JSON has
// them, whatever the chunks the body arrives in.
func TestBracketsInStringsDoNotCount(t *testing.T) {
	doc := []byte(`{"a":["[[[[{{{{", "\"[[[[", "\\", "x\\\"{{{{"], "b":{"c":[]}}`)
	for _, chunks := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
		b := &body{ReadCloser: io.NopCloser(chunks(bytes.NewReader(doc))), max: 3, json: true}
		got, err := io.ReadAll(b)
		require.NoError(t, err)
		require.Equal(t, doc, got)
		require.Zero(t, b.depth)
	}
	over := []byte(`{"s":"]]]]]]", "a":[[[1]]]}`)
	b := &body{ReadCloser: io.NopCloser(iotest.OneByteReader(bytes.NewReader(over))), max: 3, json: true, g: &guard{telemetry: nopTelemetry(t)}, ctx: context.Background()}
	_, err := io.ReadAll(b)
	require.ErrorAs(t, err, new(*DepthError))
}

func nopTelemetry(t *testing.T) *metadata.TelemetryBuilder {
	t.Helper()
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	return tb
}

// TestProtobufIsNotScanned: a protobuf body full of bracket bytes passes;
// pdata bounds protobuf nesting itself.
func TestProtobufIsNotScanned(t *testing.T) {
	url, _ := server(t, 2, 1<<20)
	code, msg := post(t, url, "application/x-protobuf", bytes.Repeat([]byte("{["), 1000))
	require.Equal(t, http.StatusOK, code, msg)
}

// TestOversizedBodyIsCounted: a body over the receiver's
// max_request_body_size is cut off by confighttp and counted here.
func TestOversizedBodyIsCounted(t *testing.T) {
	url, tel := server(t, DefaultMaxDepth, 1000)
	code, _ := post(t, url, "application/json", []byte(`["`+strings.Repeat("x", 999)+`"]`))
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = post(t, url, "application/x-protobuf", bytes.Repeat([]byte{0}, 1001))
	require.Equal(t, http.StatusBadRequest, code)
	metadatatest.AssertEqualDecodeguardRequestsRefused(t, tel, refused("size", 2), metricdatatest.IgnoreTimestamp())
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, createDefaultConfig().Validate())
	for _, d := range []int{0, -1, maxMaxDepth + 1} {
		cfg := createDefaultConfig()
		cfg.MaxDepth = d
		require.ErrorContains(t, cfg.Validate(), "max_depth: must be between 1 and 10000")
	}
}
