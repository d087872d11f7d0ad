package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/egress"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/tracing"
	"github.com/fluxora/webhook-worker/webhook"
)

// Defaults of the variables only cmd/worker uses (README,
// "Configuration"), each beside the config field it sets. Every other
// default is the one of the package whose field the variable sets
// (dispatcher.BatchSizeDefault, sender.TimeoutDefault,
// gates.RetryRPSDefault, ...), named where loadConfig reads it.
const (
	metricsAddrDefault     = ":9464"            // config.MetricsAddr
	shutdownTimeoutDefault = 30 * time.Second   // config.ShutdownTimeout
	retentionDefault       = 7 * 24 * time.Hour // config.Retention
	disableAfterDefault    = 5 * 24 * time.Hour // config.DisableAfter
)

// WEBHOOK_MAX_RESPONSE_HEADER_BYTES is from 1 KiB to 16 MiB.
const (
	maxResponseHeaderBytesMin = 1 << 10
	maxResponseHeaderBytesMax = 16 << 20
)

// config is the whole environment configuration, parsed and validated.
type config struct {
	DatabaseURL string
	// ListenURL (WEBHOOK_LISTEN_DATABASE_URL, default DatabaseURL) is the
	// direct connection of the listener and the hush. Set to another URL,
	// it also says DatabaseURL is pooled (PgBouncer in transaction mode).
	ListenURL  string
	WebhookURL string // "" when there is no WEBHOOK_URL endpoint
	Secret     []byte
	// SecretPrevious, until SecretPreviousUntil, also signs the WEBHOOK_URL
	// endpoint's webhook-signature (a rotation's grace period); nil when
	// WEBHOOK_SECRET_PREVIOUS is unset.
	SecretPrevious      []byte
	SecretPreviousUntil time.Time
	PollInterval        time.Duration
	BatchSize           int
	MaxAttempts         int
	BackoffBase         time.Duration
	BackoffMax          time.Duration
	Timeout             time.Duration
	// MaxResponseHeaderBytes caps each response's headers, in bytes
	// (WEBHOOK_MAX_RESPONSE_HEADER_BYTES, default
	// sender.MaxResponseHeaderBytesDefault, 64 KiB).
	MaxResponseHeaderBytes int64
	Concurrency            int
	// EndpointConcurrency caps one endpoint's rows in flight in this
	// worker; defaults to a quarter of Concurrency
	// (dispatcher.EndpointConcurrencyDefault).
	EndpointConcurrency int
	// DisableAfter disables an endpoint whose every attempt has failed for
	// this long; 0 never does.
	DisableAfter    time.Duration
	MetricsAddr     string // "" disables the HTTP server
	ShutdownTimeout time.Duration

	RedisURL string // "" disables the gates
	RetryRPS int
	// EnvFlow is the WEBHOOK_URL endpoint's flow control (WEBHOOK_RATE,
	// WEBHOOK_RATE_BURST, WEBHOOK_MAX_IN_FLIGHT).
	EnvFlow          webhook.Flow
	BreakerThreshold int // 0 disables the breaker
	BreakerReset     time.Duration
	GateTimeout      time.Duration // bounds each Redis call of the gates
	Retention        time.Duration // 0 keeps processed rows

	// EgressAllow opens private, CGNAT, benchmarking or unique-local
	// ranges to the egress guard; EgressAllowLoopback (default true)
	// allows loopback addresses.
	EgressAllow         []netip.Prefix
	EgressAllowLoopback bool
	// SignatureHeaders are the signature header families of every request
	// (WEBHOOK_SIGNATURE_HEADERS, default both).
	SignatureHeaders sender.Headers
	// Trust is the key file, the egress proxy and the consumers' roots.
	Trust trustConfig
	// Tracing configures the spans' export (the OTEL_* variables) when
	// TracingOn; off, no tracer is made and nothing is traced.
	Tracing   tracing.Config
	TracingOn bool

	LogFormat string // "json" or "text"
	LogLevel  slog.Level

	// ConsoleURL (WEBHOOK_CONSOLE_URL) is the console's base URL the
	// operator events carry as console_url; "" when unset.
	ConsoleURL string
}

// env reads and validates variables, collecting every problem.
type env struct {
	getenv func(string) string
	errs   []error
}

func (e *env) fail(name, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
}

func (e *env) required(name string) string {
	v := e.getenv(name)
	if v == "" {
		e.fail(name, "is required")
	}
	return v
}

func (e *env) int(name string, def, lo, hi int) int {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		e.fail(name, "must be a whole number from %d to %d, got %q", lo, hi, v)
		return def
	}
	return n
}

// egressRefusesEnvURL fails when WEBHOOK_URL names an IP address (in any
// spelling) the egress guard would refuse: better a start-up error than
// every delivery dead-lettered. (A hostname is checked at each dial,
// after DNS.)
func (e *env) egressRefusesEnvURL(c config) {
	if c.WebhookURL == "" {
		return
	}
	if err := egressRefusesURL(c.WebhookURL, c.EgressAllow, c.EgressAllowLoopback); err != nil {
		e.fail("WEBHOOK_URL", "%v", err)
	}
}

// egressRefusesURL says why the egress guard (allow, loopback) would refuse
// every delivery to raw, an endpoint URL whose host is an IP address in
// any spelling (sender.ValidateURL gives it canonical); nil for a name, or
// a URL that is not valid (its own check says why).
func egressRefusesURL(raw string, allow []netip.Prefix, loopback bool) error {
	u, err := sender.ValidateURL(raw)
	if err != nil {
		return nil
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	g := egress.New(egress.Config{Allow: allow, DenyLoopback: !loopback})
	var re *egress.RefusedError
	if errors.As(g.Check(addr), &re) {
		return fmt.Errorf("its address is %s, %s, which the egress guard refuses (list it in WEBHOOK_EGRESS_ALLOW if it is meant)", addr, re.Class)
	}
	return nil
}

// egressConfig reads only the egress guard's variables, for the operator
// commands that check an endpoint URL against it.
func egressConfig(getenv func(string) string) (allow []netip.Prefix, loopback bool, err error) {
	e := &env{getenv: getenv}
	allow = e.egressAllow("WEBHOOK_EGRESS_ALLOW", e.bool("WEBHOOK_EGRESS_ALLOW_ALL", false))
	loopback = e.bool("WEBHOOK_EGRESS_ALLOW_LOOPBACK", true)
	return allow, loopback, errors.Join(e.errs...)
}

// previousSecret reads WEBHOOK_SECRET_PREVIOUS and
// WEBHOOK_SECRET_PREVIOUS_UNTIL (RFC 3339), which come together, and only
// beside WEBHOOK_SECRET, from which it differs. An end already past is accepted (the previous
// secret then signs nothing; the start-up log says so).
func (e *env) previousSecret(secret string) ([]byte, time.Time) {
	prev, until := e.getenv("WEBHOOK_SECRET_PREVIOUS"), strings.TrimSpace(e.getenv("WEBHOOK_SECRET_PREVIOUS_UNTIL"))
	switch {
	case prev == "" && until == "":
		return nil, time.Time{}
	case prev == "":
		e.fail("WEBHOOK_SECRET_PREVIOUS", "is required when WEBHOOK_SECRET_PREVIOUS_UNTIL is set")
		return nil, time.Time{}
	case until == "":
		e.fail("WEBHOOK_SECRET_PREVIOUS_UNTIL", "is required when WEBHOOK_SECRET_PREVIOUS is set: the end of its grace period, RFC 3339 (e.g. 2026-12-05T09:00:00Z)")
		return nil, time.Time{}
	case secret == "":
		e.fail("WEBHOOK_SECRET_PREVIOUS", "needs WEBHOOK_SECRET (the new secret) beside it")
		return nil, time.Time{}
	case prev == secret:
		e.fail("WEBHOOK_SECRET_PREVIOUS", "is the same as WEBHOOK_SECRET: set WEBHOOK_SECRET to the new secret and WEBHOOK_SECRET_PREVIOUS to the one it replaces")
		return nil, time.Time{}
	}
	t, err := time.Parse(time.RFC3339, until)
	if err != nil {
		e.fail("WEBHOOK_SECRET_PREVIOUS_UNTIL", "must be an RFC 3339 time such as 2026-12-05T09:00:00Z, got %q", until)
		return nil, time.Time{}
	}
	return []byte(prev), t
}

// signatureHeaders parses "fluxora", "standard" or both, comma-separated;
// empty is both.
func (e *env) signatureHeaders(name string) sender.Headers {
	var h sender.Headers
	for _, f := range strings.Split(e.getenv(name), ",") {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "":
		case "fluxora":
			h |= sender.FluxoraHeaders
		case "standard":
			h |= sender.StandardHeaders
		default:
			e.fail(name, "must be fluxora, standard or both (comma-separated), got %q", f)
			return sender.FluxoraHeaders | sender.StandardHeaders
		}
	}
	if h == 0 {
		h = sender.FluxoraHeaders | sender.StandardHeaders
	}
	return h
}

// bool parses true/false (1/0, t/f); empty is def.
func (e *env) bool(name string, def bool) bool {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, "must be true or false, got %q", v)
		return def
	}
	return b
}

func (e *env) millis(name string, def time.Duration, lo, hi int) time.Duration {
	return time.Duration(e.int(name, int(def/time.Millisecond), lo, hi)) * time.Millisecond
}

// breakerResetMaxMS is the largest WEBHOOK_CIRCUIT_BREAKER_RESET_MS (7 days).
const breakerResetMaxMS = 7 * 24 * 3600 * 1000

// operatorBreakerReset is the breaker reset by which the operator commands
// judge a stored circuit state: the longest any worker may be configured
// with, so that no worker's own state is reported invalid, whatever the
// command's environment; nonsense (1e300, negative, not JSON) still is.
const operatorBreakerReset = breakerResetMaxMS * time.Millisecond

// opsRedisTimeout bounds each Redis call of an operator command (reading a
// circuit state): longer than the worker's WEBHOOK_GATE_TIMEOUT_MS, since an
// operator waits for the answer rather than failing open.
const opsRedisTimeout = 2 * time.Second

// opsConfig is what the operator commands (status, dlq, endpoints,
// attempts, migrate) take from the environment.
type opsConfig struct {
	DatabaseURL string
	// RedisURL is the gates' Redis, whose circuit states status shows; ""
	// shows none.
	RedisURL string
	// WebhookURL is the WEBHOOK_URL endpoint's, as given (status shows
	// the "default" endpoint and its circuit by it); "" when there is none.
	WebhookURL string
	// RedisTimeout bounds each Redis call (opsRedisTimeout).
	RedisTimeout time.Duration
	// ConsoleURL (WEBHOOK_CONSOLE_URL) is the console's base URL the
	// operator events an operator command writes carry (`endpoints
	// enable` and `disable`); "" when unset.
	ConsoleURL string
}

// loadOpsConfig reads the operator commands' configuration. LOG_FORMAT,
// LOG_LEVEL and WEBHOOK_RETENTION are validated too, as for the worker, so
// that a command refuses an environment the worker would refuse.
func loadOpsConfig(getenv func(string) string) (opsConfig, error) {
	e := &env{getenv: getenv}
	c := opsConfig{DatabaseURL: e.databaseURL(), RedisURL: e.redisURL(), WebhookURL: e.getenv("WEBHOOK_URL"),
		RedisTimeout: opsRedisTimeout, ConsoleURL: e.consoleURL("WEBHOOK_CONSOLE_URL")}
	e.logging()
	e.retention()
	return c, errors.Join(e.errs...)
}

// databaseURL reads DATABASE_URL, required; it is never printed.
func (e *env) databaseURL() string {
	v := e.required("DATABASE_URL")
	if v != "" {
		if _, err := pgxpool.ParseConfig(v); err != nil {
			// pgx's message may quote the connection string: never print it.
			e.fail("DATABASE_URL", "is not a valid PostgreSQL connection string")
		}
	}
	return v
}

// redisURL reads REDIS_URL; it is never printed (it may hold a password).
func (e *env) redisURL() string {
	v := e.getenv("REDIS_URL")
	if v != "" {
		if _, err := redis.ParseURL(v); err != nil {
			e.fail("REDIS_URL", "is not a valid redis:// or rediss:// URL")
		}
	}
	return v
}

// loadConfig reads and validates the dispatcher's whole configuration. The
// error lists every bad variable by name; it never contains a secret.
func loadConfig(getenv func(string) string) (config, error) {
	e := &env{getenv: getenv}
	c := config{DatabaseURL: e.databaseURL(), RedisURL: e.redisURL()}
	c.LogFormat, c.LogLevel = e.logging()
	c.Retention = e.retention()
	// The WEBHOOK_URL endpoint is optional now that endpoints live in
	// webhook_endpoints; its URL and secret come together or not at all.
	c.WebhookURL = e.getenv("WEBHOOK_URL")
	c.Secret = []byte(e.getenv("WEBHOOK_SECRET"))
	switch {
	case c.WebhookURL != "" && len(c.Secret) == 0:
		e.fail("WEBHOOK_SECRET", "is required when WEBHOOK_URL is set")
	case c.WebhookURL == "" && len(c.Secret) > 0:
		e.fail("WEBHOOK_URL", "is required when WEBHOOK_SECRET is set (or unset both to deliver only to the endpoints of webhook_endpoints)")
	}
	c.SecretPrevious, c.SecretPreviousUntil = e.previousSecret(string(c.Secret))
	if c.WebhookURL != "" {
		if _, err := sender.ValidateURL(c.WebhookURL); err != nil {
			e.fail("WEBHOOK_URL", "%v", err)
		}
	}
	c.PollInterval = e.millis("WEBHOOK_POLL_INTERVAL_MS", dispatcher.PollIntervalDefault, 10, 24*3600*1000)
	c.BatchSize = e.int("WEBHOOK_BATCH_SIZE", dispatcher.BatchSizeDefault, 1, 1000)
	c.MaxAttempts = e.int("WEBHOOK_MAX_ATTEMPTS", dispatcher.MaxAttemptsDefault, 1, 1000)
	c.BackoffBase = e.millis("WEBHOOK_BACKOFF_BASE_MS", dispatcher.BackoffBaseDefault, 1, 7*24*3600*1000)
	c.BackoffMax = e.millis("WEBHOOK_BACKOFF_MAX_MS", dispatcher.BackoffMaxDefault, 1, 30*24*3600*1000)
	if c.BackoffMax < c.BackoffBase {
		e.fail("WEBHOOK_BACKOFF_MAX_MS", "must be at least WEBHOOK_BACKOFF_BASE_MS (%d)", c.BackoffBase.Milliseconds())
	}
	c.Timeout = e.millis("WEBHOOK_TIMEOUT_MS", sender.TimeoutDefault, 1, 15*60*1000)
	c.MaxResponseHeaderBytes = int64(e.int("WEBHOOK_MAX_RESPONSE_HEADER_BYTES", sender.MaxResponseHeaderBytesDefault,
		maxResponseHeaderBytesMin, maxResponseHeaderBytesMax))
	c.Concurrency = e.int("WEBHOOK_CONCURRENCY", dispatcher.ConcurrencyDefault, 1, 10000)
	c.EndpointConcurrency = e.int("WEBHOOK_ENDPOINT_CONCURRENCY", dispatcher.EndpointConcurrencyDefault(c.Concurrency), 1, 10000)
	c.DisableAfter = e.days("WEBHOOK_ENDPOINT_DISABLE_AFTER", disableAfterDefault)
	c.MetricsAddr = e.metricsAddr("WEBHOOK_METRICS_ADDR")
	c.ShutdownTimeout = e.millis("WEBHOOK_SHUTDOWN_TIMEOUT_MS", shutdownTimeoutDefault, 1, 3600*1000)
	c.RetryRPS = e.int("WEBHOOK_RETRY_RPS", gates.RetryRPSDefault, 1, retryRPSMax)
	c.EnvFlow = e.envFlow()
	c.BreakerThreshold = e.int("WEBHOOK_CIRCUIT_BREAKER_THRESHOLD", 0, 0, 1_000_000)
	c.BreakerReset = e.millis("WEBHOOK_CIRCUIT_BREAKER_RESET_MS", gates.BreakerResetDefault, 1, breakerResetMaxMS)
	c.GateTimeout = e.millis("WEBHOOK_GATE_TIMEOUT_MS", gates.CallTimeoutDefault, 1, 10_000)
	c.EgressAllow = e.egressAllow("WEBHOOK_EGRESS_ALLOW", e.bool("WEBHOOK_EGRESS_ALLOW_ALL", false))
	c.EgressAllowLoopback = e.bool("WEBHOOK_EGRESS_ALLOW_LOOPBACK", true)
	e.egressRefusesEnvURL(c)
	c.SignatureHeaders = e.signatureHeaders("WEBHOOK_SIGNATURE_HEADERS")
	c.ListenURL = e.listenURL(c.DatabaseURL)
	c.Trust = e.trust()
	c.Tracing, c.TracingOn = e.tracingConfig()
	c.ConsoleURL = e.consoleURL("WEBHOOK_CONSOLE_URL")
	return c, errors.Join(e.errs...)
}

// listenURL reads WEBHOOK_LISTEN_DATABASE_URL, validated like DATABASE_URL
// (and, like it, never printed); unset, it is databaseURL.
func (e *env) listenURL(databaseURL string) string {
	v := e.getenv("WEBHOOK_LISTEN_DATABASE_URL")
	if v == "" {
		return databaseURL
	}
	if _, err := pgxpool.ParseConfig(v); err != nil {
		e.fail("WEBHOOK_LISTEN_DATABASE_URL", "is not a valid PostgreSQL connection string")
	}
	return v
}

func (e *env) logging() (string, slog.Level) {
	format := strings.ToLower(e.getenv("LOG_FORMAT"))
	switch format {
	case "":
		format = "json"
	case "json", "text":
	default:
		e.fail("LOG_FORMAT", "must be json or text, got %q", format)
	}
	var level slog.Level
	if v := e.getenv("LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			e.fail("LOG_LEVEL", "must be debug, info, warn or error, got %q", v)
		}
	}
	return format, level
}

// retention parses WEBHOOK_RETENTION: a Go duration ("168h", "90m") or a
// number of days ("7d"); "0" keeps processed rows forever.
func (e *env) retention() time.Duration {
	return e.days("WEBHOOK_RETENTION", retentionDefault)
}

// daysSpan is what WEBHOOK_RETENTION and WEBHOOK_ENDPOINT_DISABLE_AFTER
// accept: 1m to 100 years, or 0 (off).
var daysSpan = span{min: time.Minute, max: 36500 * day, zeroOff: true}

// days parses a Go duration ("168h", "90m") or a number of days ("7d"),
// from 1m to 36500d, or "0" (off), with the parser of the command flags.
func (e *env) days(name string, def time.Duration) time.Duration {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	d, err := parseDuration(v, daysSpan)
	if err != nil {
		e.fail(name, "%q is %v (e.g. 168h or 7d)", v, err)
		return def
	}
	return d
}

// consoleAddrDefault is WEBHOOK_CONSOLE_ADDR's default: loopback only.
const consoleAddrDefault = "127.0.0.1:8089"

// consoleEnv is what `worker console` takes from the environment besides
// opsConfig: its address (WEBHOOK_CONSOLE_ADDR, consoleAddrDefault), its
// token file (WEBHOOK_CONSOLE_TOKEN_FILE, required by the command), and
// TLS (WEBHOOK_CONSOLE_TLS_CERT_FILE and _KEY_FILE, together or not at
// all); WEBHOOK_CONSOLE_SECURE_COOKIE marks the cookie Secure behind a
// TLS proxy. WEBHOOK_CONSOLE_HOSTS lists the other host names (or
// host:port) it answers to (console.Config.Hosts). WEBHOOK_SIGNATURE_HEADERS
// is read as the worker reads it: the delivery page shows the signature
// headers the workers send.
type consoleEnv struct {
	Addr, TokenFile, CertFile, KeyFile string
	SecureCookie                       bool
	Hosts                              []string
	SignatureHeaders                   sender.Headers
}

func loadConsoleEnv(getenv func(string) string) (consoleEnv, error) {
	e := &env{getenv: getenv}
	c := consoleEnv{Addr: strings.TrimSpace(getenv("WEBHOOK_CONSOLE_ADDR")), TokenFile: getenv("WEBHOOK_CONSOLE_TOKEN_FILE"),
		CertFile: getenv("WEBHOOK_CONSOLE_TLS_CERT_FILE"), KeyFile: getenv("WEBHOOK_CONSOLE_TLS_KEY_FILE"),
		SecureCookie: e.bool("WEBHOOK_CONSOLE_SECURE_COOKIE", false), Hosts: e.hostList("WEBHOOK_CONSOLE_HOSTS"),
		SignatureHeaders: e.signatureHeaders("WEBHOOK_SIGNATURE_HEADERS")}
	if c.Addr == "" {
		c.Addr = consoleAddrDefault
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		e.fail("WEBHOOK_CONSOLE_TLS_CERT_FILE", "and WEBHOOK_CONSOLE_TLS_KEY_FILE come together")
	}
	return c, errors.Join(e.errs...)
}
