package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
)

// The Alertmanager destination, and the loop that fires its delayed
// alerts.

// alertmanagerAPI posts a record's alerts to Alertmanager's v2 API.
// Alertmanager merges alerts by label set, so a re-sent record changes
// nothing.
type alertmanagerAPI struct {
	url string
}

// alertsPath is the Alertmanager v2 API path alerts are posted to.
const alertsPath = "/api/v2/alerts"

func newAlertmanagerAPI(endpoint string) (*alertmanagerAPI, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), alertsPath) {
		u = u.JoinPath(alertsPath)
	}
	return &alertmanagerAPI{url: u.String()}, nil
}

func (a *alertmanagerAPI) newRequest(ctx context.Context, r *alert.Record, _ time.Time) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(r.Body))
}

// startDueLoop fires delayed Alertmanager alerts (a session still
// uncertain after alertmanager.uncertain_after) every interval.
func (s *alertSink) startDueLoop(interval time.Duration) {
	s.stopDue = make(chan struct{})
	s.dueDone = make(chan struct{})
	go func() {
		defer close(s.dueDone)
		t := time.NewTicker(max(interval, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-s.stopDue:
				return
			case <-t.C:
				s.fireDue(context.Background())
			}
		}
	}()
}

// fireDue queues the delayed Alertmanager alerts whose time has come.
func (s *alertSink) fireDue(ctx context.Context) {
	if s.policy.Alertmanager == nil || s.enqueue == nil {
		return
	}
	due := s.policy.Alertmanager.Due(s.now())
	if len(due) == 0 {
		return
	}
	recs := make([]alert.Record, 0, len(due))
	for id, als := range due {
		r, err := alert.AlertmanagerRecord(id, "."+alert.DestAlertmanager+".due", als)
		if err != nil {
			s.logger.Error("alert_sink: rendering delayed alertmanager alert", zap.Error(err))
			continue
		}
		recs = append(recs, r)
	}
	if err := s.enqueue(ctx, recs); err != nil {
		s.logger.Warn("alert_sink: queueing delayed alertmanager alerts failed", zap.Error(err))
	}
}
