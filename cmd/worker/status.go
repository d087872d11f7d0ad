package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/outbox"
	schema "github.com/fluxora/webhook-worker/sql"
)

// outboxStatus is what `worker status` reports.
type outboxStatus struct {
	outbox.QueueStatus
	Circuit *circuitStatus `json:"circuit,omitempty"`
	// Endpoints: each endpoint of the table, and the WEBHOOK_URL one
	// ("default") when it is configured or has rows.
	Endpoints []endpointStatus `json:"endpoints"`
	// EventCatalog: how many types the event catalog lists, strict mode.
	EventCatalog outbox.EventCatalogSummary `json:"event_catalog"`
}

type circuitStatus struct {
	Consumer string    `json:"consumer"`
	State    string    `json:"state"`
	Failures int       `json:"failures"`
	ResetAt  time.Time `json:"reset_at,omitzero"`
	Error    string    `json:"error,omitempty"`
}

const statusUsage = `usage: worker status [--endpoint NAME] [--json]

Pending, waiting behind their ordering key, in flight, scheduled, oldest
pending age, processed and unrouted in the last hour, leases reclaimed from
dead workers, dead letters, listening workers, the event catalog (its
types, strict mode); then per endpoint: state,
pending, in flight, scheduled, waiting for their key, blocked keys (count,
oldest), dead letters, circuit state (with REDIS_URL), client certificate
and last error. --endpoint NAME
shows that endpoint only. --json prints one JSON object (its endpoints: []
when there are none).
`

func runStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := commandFlags("worker status", statusUsage, stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	only := fs.String("endpoint", "", "show only this endpoint (default: the WEBHOOK_URL one)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, store, closeStore, code := opsConnectStore(ctx, getenv, stderr, "status")
	if store == nil {
		return code
	}
	defer closeStore()
	if *only != "" {
		return endpointOnly(ctx, store, cfg, *only, *asJSON, stdout, stderr)
	}
	var s outboxStatus
	var err error
	if s.QueueStatus, err = store.QueueStatus(ctx); err != nil {
		fmt.Fprintf(stderr, "worker status: %v\n", err)
		return exitFailure
	}
	s.Circuit = circuit(ctx, cfg)
	if s.EventCatalog, err = store.EventCatalogSummary(ctx); err != nil {
		fmt.Fprintf(stderr, "worker status: event catalog: %v\n", err)
		return exitFailure
	}
	if s.Endpoints, err = endpointsStatus(ctx, store, cfg, ""); err != nil {
		fmt.Fprintf(stderr, "worker status: endpoints: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(s)
		return exitOK
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "pending (due now)\t%d\n", s.PendingDue)
	fmt.Fprintf(w, "waiting behind their ordering key\t%d\n", s.Waiting)
	fmt.Fprintf(w, "in flight (leased to a worker)\t%d\n", s.InFlight)
	fmt.Fprintf(w, "scheduled (retries, deferrals)\t%d\n", s.ScheduledRetries)
	fmt.Fprintf(w, "oldest pending\t%s\n", secs(s.OldestPendingSecs))
	fmt.Fprintf(w, "processed in the last hour\t%d\n", s.ProcessedLastHour)
	fmt.Fprintf(w, "unrouted (last hour)\t%d\n", s.UnroutedLastHour)
	fmt.Fprintf(w, "leases reclaimed (pending, last hour)\t%d\n", s.LeasesReclaimed)
	fmt.Fprintf(w, "dead letters\t%d\n", s.DeadLetters)
	fmt.Fprintf(w, "listening workers\t%d\n", s.ListeningWorkers)
	fmt.Fprintf(w, "event catalog\t%d types, strict %s\n", s.EventCatalog.Types, onOff(s.EventCatalog.Strict))
	if c := s.Circuit; c != nil {
		if c.Error != "" {
			fmt.Fprintf(w, "circuit (%s)\tunknown: %s\n", cell(c.Consumer), cell(c.Error))
		} else {
			fmt.Fprintf(w, "circuit (%s)\t%s, %d failures\n", cell(c.Consumer), cell(c.State), c.Failures)
		}
	}
	_ = w.Flush()
	if len(s.Endpoints) > 0 {
		fmt.Fprintln(stdout)
		printEndpoints(stdout, s.Endpoints)
	}
	return exitOK
}

// endpointOnly is `worker status --endpoint NAME`.
func endpointOnly(ctx context.Context, store *outbox.Store, cfg opsConfig, name string, asJSON bool, stdout, stderr io.Writer) int {
	eps, err := endpointsStatus(ctx, store, cfg, name)
	if err != nil {
		fmt.Fprintf(stderr, "worker status: %v\n", err)
		return exitFailure
	}
	if len(eps) == 0 {
		fmt.Fprintf(stderr, "worker status: no endpoint named %q\n", name)
		return exitFailure
	}
	if asJSON {
		_ = json.NewEncoder(stdout).Encode(eps[0])
		return exitOK
	}
	printEndpoints(stdout, eps)
	return exitOK
}

// circuit reads the breaker state of WEBHOOK_URL when Redis is configured.
func circuit(ctx context.Context, cfg opsConfig) *circuitStatus {
	if cfg.RedisURL == "" || cfg.WebhookURL == "" {
		return nil
	}
	u, err := url.Parse(cfg.WebhookURL)
	if err != nil {
		return nil
	}
	cs := &circuitStatus{Consumer: u.Scheme + "://" + u.Host + u.Path}
	g, closeGates, err := opsGates(cfg)
	if err != nil {
		cs.Error = err.Error()
		return cs
	}
	defer closeGates()
	st, err := g.State(ctx, cfg.WebhookURL)
	if err != nil {
		cs.Error = "redis unreachable"
		return cs
	}
	cs.State, cs.Failures, cs.ResetAt = st.State, st.Failures, st.ResetAt
	return cs
}

// parseFlags parses args; ok is false when the command must exit with code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (it takes none)\n\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return 0, true
}

// opsPool connects for an operator command and checks the schema; on
// failure it returns nil and the exit code.
func opsPool(ctx context.Context, getenv func(string) string, stderr io.Writer, name string) (*pgxpool.Pool, int) {
	_, pool, code := opsConnect(ctx, getenv, stderr, name)
	return pool, code
}

// opsConnectStore is opsConnect's pool as a store; closeStore releases
// the pool.
func opsConnectStore(ctx context.Context, getenv func(string) string, stderr io.Writer, name string) (opsConfig, *outbox.Store, func(), int) {
	cfg, pool, code := opsConnect(ctx, getenv, stderr, name)
	if pool == nil {
		return cfg, nil, nil, code
	}
	store, err := outbox.New(pool)
	if err != nil {
		pool.Close()
		fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
		return cfg, nil, nil, exitFailure
	}
	return cfg, store, pool.Close, exitOK
}

// opsConnect is opsPool with the configuration it read.
func opsConnect(ctx context.Context, getenv func(string) string, stderr io.Writer, name string) (opsConfig, *pgxpool.Pool, int) {
	cfg, err := loadOpsConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "worker %s: configuration:\n%v\n", name, err)
		return cfg, nil, exitUsage
	}
	pool, err := openPool(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
		return cfg, nil, exitFailure
	}
	if err := schema.Check(ctx, pool); err != nil {
		pool.Close()
		fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
		if errors.Is(err, schema.ErrNotMigrated) {
			return cfg, nil, exitSchema
		}
		return cfg, nil, exitFailure
	}
	return cfg, pool, exitOK
}

// secs shows seconds as a duration, to the millisecond.
func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
