package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// States a transition can lead to; alerts.states accepts only these.
var knownStates = []string{"working", "retrying", "waiting", "stuck", "uncertain"}

// MaxSecrets is how many signing secrets a destination may hold at once:
// the current one and, during rotation, the next.
const MaxSecrets = 2

// Config defines the configuration of the alert_sink exporter.
type Config struct {
	// TimeoutConfig is the time allowed for one webhook attempt (key
	// `timeout`, default 5s).
	TimeoutConfig exporterhelper.TimeoutConfig `mapstructure:",squash"`

	// QueueConfig is the sending queue (key `sending_queue`, default on,
	// in memory, 1000 requests, 10 consumers). Set `sending_queue.storage`
	// to a file_storage extension to keep undelivered records across
	// restarts. The queue holds compact alert records, never whole traces.
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`

	// RetryConfig is the retry policy for retryable outcomes (408, 425, 429,
	// 5xx, timeouts, connection errors) (key `retry_on_failure`, default on:
	// 5s initial interval, 30s max interval, 300s max elapsed time). A
	// Retry-After header raises the next delay to the value it asks for.
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`

	// Kill is the destination of kill requests, normally the agent
	// supervisor (key `kill`, default: no endpoint).
	Kill KillConfig `mapstructure:"kill"`

	// Alerts is the optional destination of state-transition alerts (key
	// `alerts`, default: no endpoint).
	Alerts AlertsConfig `mapstructure:"alerts"`

	// Alertmanager is the optional Prometheus Alertmanager that routes
	// alerts to people (Slack, PagerDuty, e-mail; key `alertmanager`,
	// default: no endpoint).
	Alertmanager AlertmanagerConfig `mapstructure:"alertmanager"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DestinationConfig is one webhook receiver.
type DestinationConfig struct {
	// ClientConfig holds endpoint, TLS, headers, proxy and the other HTTP
	// client settings (keys `endpoint`, `tls`, `headers`, …; default: no
	// endpoint, which disables the destination). The endpoint must be
	// https://, or http:// to a loopback address.
	confighttp.ClientConfig `mapstructure:",squash"`

	// Secrets are the Standard Webhooks signing secrets, each
	// "whsec_<base64 key>" (key `secrets`, default: none). With two, every
	// request carries two signatures, for key rotation. Required for the
	// kill destination, here or in secrets_file. Empty entries (an unset
	// ${env:...}) are skipped. A secret in the collector's environment is
	// readable by every process of its user (/proc/<pid>/environ): prefer
	// secrets_file.
	Secrets []configopaque.String `mapstructure:"secrets"`

	// SecretsFile names a file of signing secrets, one "whsec_..." a line
	// (blank lines and # comments skipped): the format of loopsupervisor's
	// --secrets-file, so both can read one file (key `secrets_file`,
	// default: none). It must be a regular file that group and others
	// cannot read (mode 0600), owned by the collector's user or root; it is
	// read at validation and at start. Its secrets count with `secrets`
	// towards the limit of two; one given in both is used once.
	SecretsFile string `mapstructure:"secrets_file"`
}

// KillConfig is the destination of kill requests.
type KillConfig struct {
	DestinationConfig `mapstructure:",squash"`

	// TTL is how long a kill request stays valid after the processor
	// decided it; expires_at = decided_at + ttl, and a kill still
	// undelivered at expires_at is dropped and counted (key `kill.ttl`,
	// default 60s).
	TTL time.Duration `mapstructure:"ttl"`

	// WarnOn lists the states whose entry sends a signed warn (type
	// loop.warn, action "warn") to this destination before any kill: the
	// first step of the response ladder, where the supervisor can nudge
	// the agent (key `kill.warn_on`, default [stuck]; [] sends none). A
	// warn expires like a kill, after ttl. In dry-run mode the warns are
	// still sent while kills are only marked.
	WarnOn []string `mapstructure:"warn_on"`

	// OnlyNamedAgents sends this destination only the notices of agents
	// whose resource names it: loopsupervisor.listen equal to the
	// endpoint's host:port, which loopsupervisor gives the agent it starts
	// (key `kill.only_named_agents`, default false: every agent's). With
	// several supervisors on one collector it keeps each agent's notices
	// to its own supervisor, so a process squatting on a free supervisor
	// port receives nothing about anyone. The telemetry only narrows
	// where a notice goes; it never adds a destination.
	OnlyNamedAgents bool `mapstructure:"only_named_agents"`
}

// AlertsConfig is the destination of state alerts.
type AlertsConfig struct {
	DestinationConfig `mapstructure:",squash"`

	// States lists the target states (working, retrying, waiting, stuck,
	// uncertain) whose transitions are sent (key `alerts.states`, default:
	// empty, meaning all).
	States []string `mapstructure:"states"`

	// Reasons lists the reason codes whose transitions are sent (key
	// `alerts.reasons`, default: empty, meaning all).
	Reasons []string `mapstructure:"reasons"`

	// IncludeInstanceID puts the agent's service.instance.id into the
	// alert body's target (key `alerts.include_instance_id`, default false).
	// The instance id is what a supervisor kills by: whoever holds it and
	// can send spans can have that agent killed, and the alert receiver is
	// not trusted with kills (docs/security.md). Leave it off unless the
	// alert receiver is inside the same trust domain as the OTLP senders.
	IncludeInstanceID bool `mapstructure:"include_instance_id"`
}

// AlertmanagerConfig is the Alertmanager destination: alerts are posted to
// its v2 API (POST <endpoint>/api/v2/alerts). Entering one of States fires
// an alert, leaving the state resolves it (endsAt), and a kill, decided or
// dry-run, is an alert of its own (alertname AgentLoopKill).
type AlertmanagerConfig struct {
	// ClientConfig holds the Alertmanager's base URL and the HTTP client
	// settings (keys `endpoint`, `tls`, `headers`, …; default: no endpoint,
	// which disables the destination), e.g. http://127.0.0.1:9093. The
	// endpoint must be https://, or http:// to a loopback address.
	confighttp.ClientConfig `mapstructure:",squash"`

	// States lists the states whose entry fires an alert (key
	// `alertmanager.states`, default [stuck, uncertain]). working is not
	// accepted: it is what resolves them.
	States []string `mapstructure:"states"`

	// UncertainAfter is how long a session must stay uncertain before its
	// alert fires; an uncertain verdict that clears sooner pages nobody
	// (key `alertmanager.uncertain_after`, default 10m; 0 fires at once).
	UncertainAfter time.Duration `mapstructure:"uncertain_after"`

	// ResolveAfter is the endsAt of a firing alert, counted from the
	// decision: a session that is never heard from again (killed,
	// forgotten by the processor) stops alerting then (key
	// `alertmanager.resolve_after`, default 1h).
	ResolveAfter time.Duration `mapstructure:"resolve_after"`

	// TraceURL is a link to the session's trace in your trace UI, with
	// {trace_id}, {span_id}, {session} and {service} replaced; it becomes
	// the alert's generatorURL and its trace_url annotation (key
	// `alertmanager.trace_url`, default: none), e.g.
	// "https://grafana.example.com/explore?traceId={trace_id}".
	TraceURL string `mapstructure:"trace_url"`

	// Labels are static labels added to every alert, e.g. cluster or team
	// (key `alertmanager.labels`, default: none). They may not reuse the
	// labels the destination sets (alertname, state, reason, service,
	// agent, client, session, dry_run).
	Labels map[string]string `mapstructure:"labels"`
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() component.Config {
	q := exporterhelper.NewDefaultQueueConfig()
	return &Config{
		TimeoutConfig: exporterhelper.NewDefaultTimeoutConfig(),
		QueueConfig:   configoptional.Some(q),
		RetryConfig:   configretry.NewDefaultBackOffConfig(),
		Kill: KillConfig{
			DestinationConfig: DestinationConfig{ClientConfig: confighttp.NewDefaultClientConfig()},
			TTL:               60 * time.Second,
			WarnOn:            []string{"stuck"},
		},
		Alerts: AlertsConfig{
			DestinationConfig: DestinationConfig{ClientConfig: confighttp.NewDefaultClientConfig()},
		},
		Alertmanager: AlertmanagerConfig{
			ClientConfig:   confighttp.NewDefaultClientConfig(),
			States:         []string{"stuck", "uncertain"},
			UncertainAfter: 10 * time.Minute,
			ResolveAfter:   time.Hour,
		},
	}
}

// Validate checks the configuration. Errors name the YAML key and never
// contain a secret.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Kill.Endpoint == "" && cfg.Alerts.Endpoint == "" && cfg.Alertmanager.Endpoint == "" {
		errs = append(errs, errors.New("kill.endpoint: at least one of kill.endpoint, alerts.endpoint and alertmanager.endpoint must be set"))
	}
	if cfg.Alertmanager.Endpoint != "" {
		errs = append(errs, cfg.Alertmanager.validate())
	}
	if cfg.Kill.Endpoint != "" {
		errs = append(errs, cfg.Kill.validate("kill", true))
	}
	if cfg.Alerts.Endpoint != "" {
		errs = append(errs, cfg.Alerts.validate("alerts", false))
	}
	errs = append(errs, cfg.checkSeparateSecrets())
	if cfg.Kill.TTL <= 0 {
		errs = append(errs, fmt.Errorf("kill.ttl: must be positive, got %s", cfg.Kill.TTL))
	}
	for i, s := range cfg.Kill.WarnOn {
		if !isKnownState(s) || s == "working" {
			errs = append(errs, fmt.Errorf("kill.warn_on[%d]: state %q cannot be warned about (want one of retrying, waiting, stuck, uncertain)", i, s))
		}
	}
	for i, s := range cfg.Alerts.States {
		if !isKnownState(s) {
			errs = append(errs, fmt.Errorf("alerts.states[%d]: unknown state %q (want one of %s)", i, s, strings.Join(knownStates, ", ")))
		}
	}
	for i, r := range cfg.Alerts.Reasons {
		if strings.TrimSpace(r) == "" {
			errs = append(errs, fmt.Errorf("alerts.reasons[%d]: must not be empty", i))
		}
	}
	return errors.Join(errs...)
}

// checkSeparateSecrets rejects an alerts secret that is also a kill secret:
// whoever runs the alert receiver would hold a key the supervisors accept
// for kills. Keys are compared decoded, so two spellings of one key match.
func (cfg *Config) checkSeparateSecrets() error {
	if cfg.Kill.Endpoint == "" || cfg.Alerts.Endpoint == "" {
		return nil
	}
	// Unreadable files and malformed secrets are reported by each
	// destination's own check.
	killSecrets, _ := cfg.Kill.signingSecrets("kill")
	alertSecrets, _ := cfg.Alerts.signingSecrets("alerts")
	var errs []error
	for _, a := range alertSecrets {
		ak, err := stdwebhook.ParseSecret(a.value)
		if err != nil {
			continue
		}
		for _, k := range killSecrets {
			if kk, err := stdwebhook.ParseSecret(k.value); err == nil && bytes.Equal(ak, kk) {
				errs = append(errs, fmt.Errorf("%s: must differ from every kill.secrets and kill.secrets_file entry: the alert receiver must not hold a key supervisors accept for kills", a.where))
				break
			}
		}
	}
	return errors.Join(errs...)
}

func (am *AlertmanagerConfig) validate() error {
	var errs []error
	if err := checkEndpoint(am.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("alertmanager.endpoint: %w", err))
	}
	for i, s := range am.States {
		if !isKnownState(s) || s == "working" {
			errs = append(errs, fmt.Errorf("alertmanager.states[%d]: state %q cannot fire an alert (want one of retrying, waiting, stuck, uncertain)", i, s))
		}
	}
	if am.UncertainAfter < 0 {
		errs = append(errs, fmt.Errorf("alertmanager.uncertain_after: must not be negative, got %s", am.UncertainAfter))
	}
	if am.ResolveAfter <= 0 {
		errs = append(errs, fmt.Errorf("alertmanager.resolve_after: must be positive, got %s", am.ResolveAfter))
	}
	if err := alert.CheckTraceURL(am.TraceURL); err != nil {
		errs = append(errs, fmt.Errorf("alertmanager.trace_url: %w", err))
	}
	for k, v := range am.Labels {
		if !labelName.MatchString(k) {
			errs = append(errs, fmt.Errorf("alertmanager.labels: %q is not a label name (want [a-zA-Z_][a-zA-Z0-9_]*)", k))
		}
		if slices.Contains(alert.ReservedLabels, k) {
			errs = append(errs, fmt.Errorf("alertmanager.labels: %q is set by the destination itself", k))
		}
		if v == "" {
			errs = append(errs, fmt.Errorf("alertmanager.labels.%s: must not be empty", k))
		}
	}
	return errors.Join(errs...)
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func isKnownState(s string) bool {
	for _, k := range knownStates {
		if s == k {
			return true
		}
	}
	return false
}

func (d *DestinationConfig) validate(key string, secretRequired bool) error {
	var errs []error
	if err := checkEndpoint(d.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("%s.endpoint: %w", key, err))
	}
	secrets, err := d.signingSecrets(key)
	if err != nil {
		errs = append(errs, err)
	}
	if err == nil && secretRequired && len(secrets) == 0 {
		errs = append(errs, fmt.Errorf("%s.secrets: at least one signing secret is required (in %s.secrets_file, a 0600 file, or %s.secrets)", key, key, key))
	}
	if len(secrets) > MaxSecrets {
		errs = append(errs, fmt.Errorf("%s.secrets: at most %d secrets (current and next during rotation) in secrets and secrets_file together, got %d", key, MaxSecrets, len(secrets)))
	}
	for _, s := range secrets {
		if _, err := stdwebhook.ParseSecret(s.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.where, err))
		}
	}
	return errors.Join(errs...)
}

// checkEndpoint accepts https URLs, and http URLs whose host is a loopback
// address or "localhost".
func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Host == "" {
		return errors.New("must be an absolute http(s) URL with a host")
	}
	if u.User != nil {
		return errors.New("must not carry credentials in the URL; use headers")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost), got host %q; use https", u.Hostname())
	default:
		return fmt.Errorf("scheme must be https (or http to loopback), got %q", u.Scheme)
	}
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
