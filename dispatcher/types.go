package dispatcher

import (
	"context"
	"time"
)

// Row is one claimed outbox row, held under a lease until its outcome is
// recorded or it is released.
type Row struct {
	ID         int64
	Token      [16]byte // the lease token; outcomes are fenced by it
	DeliveryID string   // uuid text, the same on every attempt of an event
	EventType  string
	Payload    []byte // the JSON body, byte for byte
	Attempt    int    // 1 for the first attempt
	CreatedAt  time.Time
	Reclaimed  bool // its previous lease expired without an outcome
}

// Kind says what becomes of a claimed row. The values match the claimer's.
type Kind int

// The kinds of Outcome.
const (
	// Done: delivered; the row is marked processed.
	Done Kind = iota + 1
	// Retry: the attempt failed and another is scheduled after Delay.
	Retry
	// Defer: a gate refused the attempt; the same attempt is scheduled
	// after Delay, none spent.
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
	Attempt int           // of the new row (Retry, Defer), or attempts made (Dead)
	Delay   time.Duration // until the new row is due (Retry, Defer)
	Status  int           // last HTTP status (Dead), 0 for none
	Error   string        // last error (Dead)
}

// Store is what the dispatcher needs from the claimer.
type Store interface {
	// Claim leases up to limit due rows, oldest first.
	Claim(ctx context.Context, limit int) ([]Row, error)
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
	DeferFor time.Duration // when not allowed: how long to defer the row
	Probe    bool          // this attempt is the circuit breaker's probe
}

// Gate is the rate limit and circuit breaker in front of the consumer.
type Gate interface {
	Check(ctx context.Context, attempt int) Decision
	Record(ctx context.Context, c Class, probe bool)
}

// Hush silences producers' NOTIFYs while the worker is busy.
type Hush interface {
	Set(busy bool)
	Help()
}

type openGate struct{}

func (openGate) Check(context.Context, int) Decision { return Decision{Allow: true} }
func (openGate) Record(context.Context, Class, bool) {}

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
