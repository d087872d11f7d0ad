package dispatcher

import (
	"context"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// Row is one claimed outbox row: the domain's Delivery.
type Row = webhook.Delivery

// Query is what one claim asks for.
type Query struct {
	Limit       int            // the most rows
	Skip        []string       // endpoints (uuid text) at their limit or parked: leave their rows unread
	Room        map[string]int // the most rows of each endpoint (uuid text)
	DefaultRoom int            // the most rows of an endpoint not in Room
	EnvRoom     int            // the most rows of the WEBHOOK_URL endpoint
	SkipEnv     bool           // leave the WEBHOOK_URL endpoint's rows
}

// Batch is what one claim returns.
type Batch struct {
	Rows []Row // leased to this worker, oldest first
	// Taken counts the queue rows and events taken (not the fresh rows).
	Taken int
	// More says rows were left that a larger claim would have taken.
	More bool
	// FannedOut events made Deliveries new rows, due at once; Fresh of
	// them are in Rows, leased by the claim itself.
	FannedOut, Deliveries, Fresh int
	// Unrouted holds the event types of events that no endpoint took.
	Unrouted []string
	// Broken are the delivery ids of leased rows the worker could not
	// decode, moved to the dead letter alone (unless BrokenErr).
	Broken    []string
	BrokenErr error
}

// Kind says what becomes of a claimed row (webhook.Kind).
type Kind = webhook.Kind

// The kinds of Outcome (webhook's).
const (
	Done    = webhook.Done
	Retry   = webhook.Retry
	Defer   = webhook.Defer
	Dead    = webhook.Dead
	Release = webhook.Release
)

// Outcome is what is recorded for one row (webhook.Outcome).
type Outcome = webhook.Outcome

// Health is what an attempt says of its endpoint (webhook.Health).
type Health = webhook.Health

// The values of Outcome.Health (webhook's).
const (
	NoAttempt = webhook.NoAttempt
	Healthy   = webhook.Healthy
	Failing   = webhook.Failing
)

// Store is what the dispatcher needs from the claimer.
type Store interface {
	// Claim leases due rows, oldest first, and fans out the events among
	// them.
	Claim(ctx context.Context, q Query) (Batch, error)
	// Record writes outcomes in one statement and reports which were
	// written (false: the lease was lost to another worker).
	Record(ctx context.Context, outcomes []Outcome) ([]bool, error)
	// NextDue is the time until the earliest scheduled row is due.
	NextDue(ctx context.Context) (time.Duration, bool, error)
}

// Class is how an HTTP attempt ended (webhook.Class).
type Class = webhook.Class

// The classes of Result (webhook's).
const (
	Delivered = webhook.Delivered
	Retryable = webhook.Retryable
	Permanent = webhook.Permanent
	// NotAttempted: the sender sent nothing and the row is deferred (the
	// same attempt, later), as a gate's refusal defers it.
	NotAttempted = webhook.NotAttempted
)

// Result is one HTTP attempt's result (webhook.Result).
type Result = webhook.Result

// Sender makes one HTTP attempt at a row.
type Sender interface {
	Send(ctx context.Context, r Row) Result
}

// Decision is a gate's verdict on one attempt.
type Decision struct {
	Allow    bool
	DeferFor time.Duration // when not allowed: how long to defer the row (taken within [1ms, Config.DeferMax])
	Probe    bool          // this attempt is the circuit breaker's probe
}

// Gate is the rate limit and circuit breaker in front of each endpoint.
type Gate interface {
	Check(ctx context.Context, r Row) Decision
	Record(ctx context.Context, r Row, c Class, probe bool)
}

// Disabler disables an endpoint of the table that answered 410 Gone and
// dead-letters its pending deliveries (and counts it).
type Disabler interface {
	Disable(ctx context.Context, endpointID, reason string) (moved int64, err error)
}

// Hush silences producers' NOTIFYs while the worker is busy.
type Hush interface {
	Set(busy bool)
	Help()
}

type openGate struct{}

func (openGate) Check(context.Context, Row) Decision      { return Decision{Allow: true} }
func (openGate) Record(context.Context, Row, Class, bool) {}

type noHush struct{}

func (noHush) Set(bool) {}
func (noHush) Help()    {}
