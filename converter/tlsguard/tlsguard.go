// Package tlsguard is a confmap converter of the otelcol-loop distribution
// that refuses a configuration in which a receiver listens beyond loopback
// without TLS. Whoever can send spans can have an agent killed, so the
// receivers take a bearer token; in plaintext off loopback that token, and
// the spans with the instance ids kills name, cross the network in the
// clear. Shipped configurations serve TLS wherever they listen beyond
// loopback, but an address moved by the environment
// (config/production.yaml's LOOP_OTLP_*_ENDPOINT) used to listen in
// plaintext: the converter sees the configuration after ${env:...} is
// expanded, so the collector (and `otelcol-loop validate`) refuses to start
// instead.
package tlsguard // import "github.com/otelcol-loop/otelcol-loop/converter/tlsguard"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/confmap"
)

// NewFactory returns the factory of the converter.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter { return converter{} })
}

type converter struct{}

// Convert checks every receiver's server settings: the receiver's own
// (`receivers::<id>::endpoint`) and each protocol's
// (`receivers::<id>::protocols::<name>::endpoint`, the OTLP receiver's). It
// changes nothing.
func (converter) Convert(_ context.Context, conf *confmap.Conf) error {
	receivers, _ := conf.Get("receivers").(map[string]any)
	var errs []error
	for _, id := range sortedKeys(receivers) {
		rc, _ := receivers[id].(map[string]any)
		errs = append(errs, checkServer("receivers::"+id, rc))
		protocols, _ := rc["protocols"].(map[string]any)
		for _, p := range sortedKeys(protocols) {
			pc, _ := protocols[p].(map[string]any)
			errs = append(errs, checkServer("receivers::"+id+"::protocols::"+p, pc))
		}
	}
	return errors.Join(errs...)
}

// checkServer refuses a server whose endpoint is not loopback unless it
// has a TLS certificate. key is where the server's settings are.
func checkServer(key string, server map[string]any) error {
	var endpoint string
	if v := server["endpoint"]; v != nil {
		// A string, unless an ${env:...} value parsed as something else.
		endpoint = fmt.Sprint(v)
	}
	if endpoint == "" {
		// The receiver's default, loopback for every receiver of this
		// distribution.
		return nil
	}
	if transport, _ := server["transport"].(string); strings.HasPrefix(transport, "unix") {
		return nil
	}
	if loopback, err := isLoopback(endpoint); err != nil {
		return fmt.Errorf("%s::endpoint: %w", key, err)
	} else if loopback || hasCertificate(server["tls"]) {
		return nil
	}
	return fmt.Errorf("%s::endpoint: %q is beyond loopback and %s::tls has no certificate: "+
		"this distribution refuses plaintext beyond loopback (bearer tokens and spans, which carry the "+
		"instance ids kills name, would cross the network in the clear); set %s::tls::cert_file and "+
		"key_file, or listen on 127.0.0.1 behind a TLS-terminating proxy", key, endpoint, key, key)
}

// isLoopback reports whether a host:port endpoint binds loopback only; an
// empty host binds every interface.
func isLoopback(endpoint string) (bool, error) {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false, fmt.Errorf("%q: %w", endpoint, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// hasCertificate reports whether TLS server settings name a certificate,
// from a file or inline.
func hasCertificate(tls any) bool {
	m, _ := tls.(map[string]any)
	for _, k := range []string{"cert_file", "cert_pem"} {
		if s, _ := m[k].(string); s != "" {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
