package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/fluxora/webhook-worker/capped"
	"github.com/fluxora/webhook-worker/console"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/sender"
)

const consoleUsage = `usage: worker console [--addr HOST:PORT]

Serves the operator console (pages and a JSON API under /api/) at --addr,
else WEBHOOK_CONSOLE_ADDR, default 127.0.0.1:8089. It needs DATABASE_URL
and WEBHOOK_CONSOLE_TOKEN_FILE: a file (mode 0600 or 0400) whose first
line is the token (at least 32 characters, 12 of them distinct) every
request must present, as
"Authorization: Bearer TOKEN" or through the login form's session cookie.
With WEBHOOK_CONSOLE_TLS_CERT_FILE and WEBHOOK_CONSOLE_TLS_KEY_FILE it
serves HTTPS. It answers only requests for its own address (and
localhost on loopback) or for a name WEBHOOK_CONSOLE_HOSTS lists (host
names or host:port, comma-separated). Runs until SIGINT or SIGTERM. See
docs/console.md and docs/security.md.
Exit codes: 0 stopped, 1 failure, 2 usage or configuration, 3 not migrated.
`

// tokenHowTo is what `worker console` says without a token file.
const tokenHowTo = `worker console: WEBHOOK_CONSOLE_TOKEN_FILE is required: a file holding the console's token. Make one:
  umask 077; head -c 32 /dev/urandom | base64 > console.token
  export WEBHOOK_CONSOLE_TOKEN_FILE=$PWD/console.token
`

func runConsole(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := commandFlags("worker console", consoleUsage, stderr)
	addr := fs.String("addr", "", "listen address (default WEBHOOK_CONSOLE_ADDR, else 127.0.0.1:8089)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cenv, err := loadConsoleEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "worker console: configuration:\n%v\n", err)
		return exitUsage
	}
	if cenv.TokenFile == "" {
		fmt.Fprint(stderr, tokenHowTo)
		return exitUsage
	}
	token, err := readTokenFile(cenv.TokenFile, func(w string) { fmt.Fprintf(stderr, "worker console: warning: %s\n", w) })
	if err != nil {
		fmt.Fprintf(stderr, "worker console: %v\n\n%s", err, tokenHowTo)
		return exitUsage
	}
	if *addr != "" {
		cenv.Addr = *addr
	}
	cfg, pool, code := opsConnect(ctx, getenv, stderr, "console")
	if pool == nil {
		return code
	}
	defer pool.Close()
	store, _ := outbox.New(pool) // pool is not nil
	store.SetConsoleURL(cfg.ConsoleURL)
	// Rotating a secret stores it sealed: without WEBHOOK_SECRETS_KEY_FILE
	// the console refuses that action (endpoints.ErrNoSealer), nothing else.
	var sealer endpoints.Sealer
	if k, err := secretsKeyring(getenv, stderr); err == nil {
		sealer = keyringSealer{k}
	} else if !errors.Is(err, errNoKeyFile) {
		fmt.Fprintf(stderr, "worker console: %v\n", err)
		return exitUsage
	}
	eps, _ := endpoints.New(endpoints.Config{Pool: pool, Sealer: sealer, ConsoleURL: cfg.ConsoleURL}) // nor here
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// With REDIS_URL, the overview shows the endpoints' breakers.
	var breakers console.Breakers
	if cfg.RedisURL != "" {
		g, closeGates, err := opsGates(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "worker console: REDIS_URL: %v\n", err)
			return exitUsage
		}
		defer closeGates()
		breakers = consoleBreakers{g}
	}
	srv, err := console.New(console.Config{Store: store, Endpoints: consoleEndpoints{eps}, Token: []byte(token),
		DefaultEndpoint: cfg.WebhookURL != "", SecureCookies: cenv.SecureCookie, Logger: log, Hosts: consoleHosts(cenv),
		Breakers: breakers, DefaultURL: cfg.WebhookURL, RequestHeaders: consoleRequestHeaders(cenv.SignatureHeaders)})
	if err != nil {
		fmt.Fprintf(stderr, "worker console: %v\n", err)
		return exitFailure
	}
	return serveConsole(ctx, srv, cenv, stdout, stderr)
}

// Limits of the console's server: a few operators' browsers (a handful of
// connections each) and scripts. A write may wait for a replay or purge
// of many rows, hence the longer write timeout.
const (
	consoleMaxConns          = 64
	consoleReadHeaderTimeout = 5 * time.Second
	consoleReadTimeout       = 30 * time.Second
	consoleWriteTimeout      = time.Minute
	consoleIdleTimeout       = time.Minute
)

// serveConsole listens on cenv.Addr, prints the address, and serves until
// ctx ends (then drains for up to 5 s).
func serveConsole(ctx context.Context, h http.Handler, cenv consoleEnv, stdout, stderr io.Writer) int {
	ln, err := capped.Listen(cenv.Addr, consoleMaxConns)
	if err != nil {
		fmt.Fprintf(stderr, "worker console: %v\n", err)
		return exitFailure
	}
	scheme := "http"
	if cenv.CertFile != "" {
		scheme = "https"
	}
	fmt.Fprintf(stdout, "console: serving %s://%s/\n", scheme, ln.Addr())
	hs := ln.Server(h, capped.Timeouts{Header: consoleReadHeaderTimeout, Read: consoleReadTimeout, Write: consoleWriteTimeout, Idle: consoleIdleTimeout},
		slog.NewLogLogger(slog.NewTextHandler(stderr, nil).WithAttrs([]slog.Attr{slog.String("component", "console")}), slog.LevelWarn))
	done := make(chan error, 1)
	go func() {
		if cenv.CertFile != "" {
			done <- hs.ServeTLS(ln, cenv.CertFile, cenv.KeyFile)
		} else {
			done <- hs.Serve(ln)
		}
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err = hs.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "worker console: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// consoleEndpoints adapts the endpoint catalog to console.Endpoints: its
// errors become outbox.ErrEndpointNotFound and console.ErrInvalid.
type consoleEndpoints struct{ s *endpoints.Store }

func consoleErr(err error) error {
	var fe *endpoints.FieldError
	switch {
	case errors.Is(err, endpoints.ErrNotFound):
		return fmt.Errorf("%w: %v", outbox.ErrEndpointNotFound, err)
	case errors.As(err, &fe):
		return fmt.Errorf("%w: %v", console.ErrInvalid, err)
	}
	return err
}

func (c consoleEndpoints) Disable(ctx context.Context, name, reason string) (int64, error) {
	n, err := c.s.DisableByName(ctx, name, reason)
	return n, consoleErr(err)
}

func (c consoleEndpoints) Enable(ctx context.Context, name string) error {
	_, err := c.s.Enable(ctx, name)
	return consoleErr(err)
}

// RotateSecret makes a new secret of the current one's kind and returns
// what its consumer is given: an HMAC secret, or an ed25519 key's public
// key (whpk_…), never the private key.
func (c consoleEndpoints) RotateSecret(ctx context.Context, name string, grace time.Duration) (string, error) {
	_, iss, err := c.s.RotateKey(ctx, name, "", grace)
	if err != nil {
		return "", consoleErr(err)
	}
	return cmp.Or(iss.Secret, iss.PublicKey), nil
}

// consoleRequestHeaders gives the console the sender's own headers of a
// request (sender.Header, which Send sends), in the signature families
// the workers send, the signatures left empty (the console masks them
// anyway). The console may not import the sender (a leaf never imports
// another); it takes the function from here.
func consoleRequestHeaders(families sender.Headers) func(console.Request) http.Header {
	return func(r console.Request) http.Header {
		return sender.Header(sender.Request{DeliveryID: r.DeliveryID, EventType: r.EventType, Attempt: r.Attempt, Endpoint: r.Endpoint,
			Headers: r.Headers, OrderingKey: r.OrderingKey, Sequence: r.Sequence}, families, r.Started.Unix(), sender.Signatures{})
	}
}

// consoleBreakers reads the console's breakers through the gates, all in
// one round trip.
type consoleBreakers struct{ g *gates.Gates }

func (b consoleBreakers) Breakers(ctx context.Context, urls []string) (map[string]console.Breaker, error) {
	states, err := b.g.States(ctx, urls)
	if err != nil {
		return nil, err
	}
	out := make(map[string]console.Breaker, len(states))
	for u, s := range states {
		cb := console.Breaker{State: s.State}
		if s.State == "open" {
			at := s.ResetAt
			cb.OpenUntil = &at
		}
		out[u] = cb
	}
	return out, nil
}
