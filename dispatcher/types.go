package dispatcher

import (
	"context"
	"time"
)

// Row is one claimed outbox row, held under a lease until its outcome is
// recorded or it is released: one delivery of an event to one endpoint.
type Row struct {
	ID         int64
	Token      [16]byte // the lease token; outcomes are fenced by it
	DeliveryID string   // uuid text, the same on every attempt of a delivery
	EventType  string
	Payload    []byte // the JSON body, byte for byte
	Headers    []byte // the JSON object text of extra request headers; nil for none
	Attempt    int    // 1 for the first attempt
	CreatedAt  time.Time
	Reclaimed  bool // its previous lease expired without an outcome

	// EndpointID is the endpoint's uuid text; "" for the WEBHOOK_URL
	// endpoint, whose other fields below are empty.
	EndpointID     string
	EndpointName   string
	URL            string
	Secret         string
	Enabled        bool
	DisabledReason string
	RetryRPS       int // 0: the configured default
	// PreviousSecret, until PreviousUntil, is the secret a rotation
	// replaced, still signing beside Secret; "" when none is in its grace.
	PreviousSecret string
	PreviousUntil  time.Time
}

// Query is what one claim asks for.
type Query struct {
	Limit   int      // the most rows
	Skip    []string // endpoints (uuid text) at their cap: leave their rows
	SkipEnv bool     // leave the WEBHOOK_URL endpoint's rows
}

// Batch is what one claim returns.
type Batch struct {
	Rows []Row // leased to this worker, oldest first
	// Taken counts Rows and the events recorded processed at fan-out.
	Taken int
	// FannedOut events made Deliveries new rows, due at once, not in Rows.
	FannedOut, Deliveries int
	// Unrouted holds the event types of events that no endpoint took.
	Unrouted []string
	// Endpoints is the number of enabled endpoints in the table.
	Endpoints int
	// Broken are the delivery ids of leased rows the worker could not
	// decode, moved to the dead letter alone (unless BrokenErr).
	Broken    []string
	BrokenErr error
}

// Kind says what becomes of a claimed row. The values match the claimer's.
type Kind int

// The kinds of Outcome.
const (
	// Done: delivered; the row is marked processed.
	Done Kind = iota + 1
	// Retry: the attempt failed and another is scheduled after Delay.
	Retry
	// Defer: a gate refused the attempt; the row itself, the same attempt,
	// is moved to after Delay (no row is made), none spent.
	Defer
	// Dead: moved to the dead-letter table.
	Dead
	// Release: not attempted (shutdown); the lease ends at once.
	Release
)

// Outcome is what is recorded for one row.
type Outcome struct {
	ID      int64
	Token   [16]byte
	Kind    Kind
	Attempt int           // of the new row (Retry), the row's own (Defer), or attempts made (Dead)
	Delay   time.Duration // until the new row (Retry) or the row itself (Defer) is due
	Status  int           // last HTTP status (Dead, Retry), 0 for none
	Error   string        // last error (Dead, Retry)
	Health  Health        // what the attempt says of the endpoint
	// The attempt made, recorded in webhook_attempts when Health is not
	// NoAttempt: when it began (the dispatcher's clock), how long it took,
	// its class ("" when delivered, else "retryable" or "permanent") and
	// its own error text.
	Started      time.Time
	Took         time.Duration
	AttemptClass string
	AttemptError string
}

// Health is what an attempt says of its endpoint. The values match the
// claimer's.
type Health int

// The values of Outcome.Health.
const (
	NoAttempt Health = iota // nothing was sent
	Healthy                 // 2xx
	Failing                 // the attempt failed
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

// Class is how an HTTP attempt ended.
type Class int

// The classes of Result.
const (
	// Delivered: the consumer answered 2xx.
	Delivered Class = iota + 1
	// Retryable: network error, timeout, 408, 429, 5xx.
	Retryable
	// Permanent: any other status, or a request that cannot be built.
	Permanent
)

// String is the metric label of c.
func (c Class) String() string {
	switch c {
	case Delivered:
		return "delivered"
	case Retryable:
		return "retryable"
	case Permanent:
		return "permanent"
	default:
		return "unknown"
	}
}

// Result is one HTTP attempt's result.
type Result struct {
	Class      Class
	Status     int           // 0 when no response arrived
	Error      string        // short reason when not delivered; never a secret or payload
	RetryAfter time.Duration // the consumer's Retry-After (429, 503), else 0
	Duration   time.Duration
}

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

// String is the log value of k.
func (k Kind) String() string {
	switch k {
	case Done:
		return "delivered"
	case Retry:
		return "retry"
	case Defer:
		return "deferred"
	case Dead:
		return "dead_letter"
	case Release:
		return "released"
	default:
		return "unknown"
	}
}
