package alertsink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUndeliveredKillNamesTheEndpoint: when nothing listens where kills go,
// the error the pipeline logs says where that was (a supervisor on another
// port is the usual cause), without the query of the URL (credentials in
// the URL are refused by Validate; endpointForLogs drops them too).
func TestUndeliveredKillNamesTheEndpoint(t *testing.T) {
	closed := closedURL(t) // http://127.0.0.1:PORT/kill
	for name, endpoint := range map[string]string{"plain": closed, "with a query": closed + "?token=abc123"} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(endpoint)
			cfg.RetryConfig.MaxElapsedTime = 20 * time.Millisecond
			exp := startTraces(t, cfg, nopSettings())
			err := exp.ConsumeTraces(context.Background(), tracesWith(killEvent("ld_endpoint_"+strings.ReplaceAll(name, " ", "_"), time.Now())))
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, "to "+closed+": connection_error")
			assert.Contains(t, msg, "loopsupervisor --listen must match kill.endpoint")
			for _, secret := range []string{"abc123", "token"} {
				assert.NotContains(t, msg, secret)
			}
		})
	}
}

func TestEndpointForLogs(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8787/kill":                      "http://127.0.0.1:8787/kill",
		"https://user:pw@sup.example:443/kill?sig=x#frag": "https://sup.example:443/kill",
		"https://sup.example":                             "https://sup.example",
		"::not a url":                                     "<unparsable endpoint>",
		"/relative/only":                                  "<unparsable endpoint>",
	} {
		assert.Equal(t, want, endpointForLogs(in), in)
	}
}
