// Package claimer is the claim's policy over the store (package outbox):
// how many rows one claim takes, how long it leases them, and whether the
// worker has a WEBHOOK_URL endpoint. The statements themselves, their
// guarantees and the outcome writes are the store's.
//
// Claim takes up to a batch of due rows, per endpoint in (created_at, id)
// order and round robin between endpoints (outbox.ClaimSQL), with
// FOR UPDATE SKIP LOCKED, stamps each with locked_until (the database's
// now() plus the Lease) and a fresh lease_token, and commits at once: no
// transaction stays open while the rows are delivered. A row whose lease has
// expired (its worker died, froze or lost the database) is claimable again.
//
// Record writes many outcomes in one statement, atomic per row and for the
// whole call, each fenced by its lease token: a row whose lease was taken
// over by another worker is left alone, and Record reports it as lost. This
// is the at-least-once guarantee: a row is marked processed only after its
// completed HTTP attempt, by the worker that still holds it.
package claimer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// BatchSizeDefault is the default maximum number of rows per claim.
const BatchSizeDefault = 10

// LeaseDefault is how long a claim holds its rows when Config.Lease is 0.
const LeaseDefault = 30 * time.Second

// MaxDelay is the longest delay Record writes (outbox.MaxDelay).
const MaxDelay = outbox.MaxDelay

// The domain's types, as the claimer's callers name them.
type (
	// Row is one claimed row (webhook.Delivery).
	Row = webhook.Delivery
	// Token is a lease (webhook.Token).
	Token = webhook.Token
	// Outcome is what Record writes for one row (webhook.Outcome).
	Outcome = webhook.Outcome
	// Kind says what becomes of a row (webhook.Kind).
	Kind = webhook.Kind
	// Health is what an attempt says of its endpoint (webhook.Health).
	Health = webhook.Health
	// Batch is what one Claim returns (outbox.Batch).
	Batch = webhook.Batch
	// Broken is a row the claim could not decode (outbox.Broken).
	Broken = webhook.Broken
)

// The kinds and health values (webhook's).
const (
	Done      = webhook.Done
	Retry     = webhook.Retry
	Defer     = webhook.Defer
	Dead      = webhook.Dead
	Release   = webhook.Release
	NoAttempt = webhook.NoAttempt
	Healthy   = webhook.Healthy
	Failing   = webhook.Failing
)

// Config configures a Claimer.
type Config struct {
	// Pool supplies the connections for claims and records; each holds a
	// connection only for one statement. Required.
	Pool *pgxpool.Pool
	// BatchSize is the most rows of a Claim whose Query has no Limit.
	// Defaults to BatchSizeDefault (10).
	BatchSize int
	// Lease is how long, by the database clock, a claim holds its rows:
	// longer than the worst case from the claim to the recorded outcome
	// (the request timeout plus the gates plus a margin). Defaults to
	// LeaseDefault (30s).
	Lease time.Duration
	// EnvEndpoint says the worker delivers to a WEBHOOK_URL endpoint: an
	// event's own row is then that endpoint's delivery. Without it, an
	// event is only fanned out to the endpoints of webhook_endpoints.
	EnvEndpoint bool
}

// Claimer claims batches of due rows and records their outcomes.
type Claimer struct {
	store     *outbox.Store
	batchSize int
	lease     time.Duration
	env       bool
}

// New returns a Claimer or an error naming the bad field.
func New(cfg Config) (*Claimer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("claimer: Pool is required")
	}
	if cfg.BatchSize < 0 {
		return nil, fmt.Errorf("claimer: BatchSize must be positive, got %d", cfg.BatchSize)
	}
	if cfg.Lease < 0 || (cfg.Lease > 0 && cfg.Lease < time.Millisecond) {
		return nil, fmt.Errorf("claimer: Lease must be at least 1ms, got %s", cfg.Lease)
	}
	store, err := outbox.New(cfg.Pool)
	if err != nil {
		return nil, err
	}
	return &Claimer{store: store, batchSize: cmp.Or(cfg.BatchSize, BatchSizeDefault), lease: cmp.Or(cfg.Lease, LeaseDefault),
		env: cfg.EnvEndpoint}, nil
}

// Query is what one Claim takes.
type Query struct {
	// Limit is the most rows (the dispatcher's free slots bound it);
	// <= 0 means BatchSize.
	Limit int
	// Skip lists endpoints (uuid text) whose rows the claim leaves alone
	// and unread: those at their limit in this worker, or parked.
	Skip []string
	// Room gives, by endpoint (uuid text), the most rows the claim takes
	// of it; DefaultRoom that of any other endpoint (0: Limit).
	Room        map[string]int
	DefaultRoom int
	// EnvRoom is the most rows of the WEBHOOK_URL endpoint (0: Limit);
	// SkipEnv leaves its deliveries alone. Events still in want of
	// fan-out are claimed anyway.
	EnvRoom int
	SkipEnv bool
}

// Claim leases due rows (see Query), fanning out the events among them, in
// one statement and one round trip (outbox.Store.Claim). It returns an
// empty Batch and no error when nothing is due.
func (c *Claimer) Claim(ctx context.Context, q Query) (Batch, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = c.batchSize
	}
	return c.store.Claim(ctx, webhook.Query{Limit: limit, Lease: c.lease, Skip: q.Skip, Room: q.Room,
		DefaultRoom: q.DefaultRoom, EnvRoom: q.EnvRoom, SkipEnv: q.SkipEnv, Env: c.env})
}

// Record writes outcomes in one statement and returns, in outcomes order,
// whether each was written (false: the lease was lost to another worker).
// See outbox.Store.Record.
func (c *Claimer) Record(ctx context.Context, outcomes []Outcome) ([]bool, error) {
	return c.store.Record(ctx, outcomes)
}

// NextDue returns how long, by the database clock, until the earliest
// scheduled (not yet due) pending row is due; ok is false when there is
// none.
func (c *Claimer) NextDue(ctx context.Context) (time.Duration, bool, error) {
	return c.store.NextDue(ctx)
}
