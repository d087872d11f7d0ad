package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// Store is what the dispatcher needs from the store (*outbox.Store).
type Store interface {
	// Claim leases due rows, oldest first, and fans out the events among
	// them.
	Claim(ctx context.Context, q webhook.Query) (webhook.Batch, error)
	// Record writes outcomes in one statement and reports which were
	// written (false: the lease was lost to another worker).
	Record(ctx context.Context, outcomes []webhook.Outcome) ([]bool, error)
	// NextDue is the time until the earliest scheduled row is due.
	NextDue(ctx context.Context) (time.Duration, bool, error)
}

// Sender makes one HTTP attempt at a row.
type Sender interface {
	Send(ctx context.Context, r webhook.Delivery) webhook.Result
}

// Decision is a gate's verdict on one attempt.
type Decision struct {
	Allow    bool
	DeferFor time.Duration // when not allowed: how long to defer the row (taken within [1ms, Config.DeferMax])
	Probe    bool          // this attempt is the circuit breaker's probe
}

// Gate is the rate limit and circuit breaker in front of each endpoint.
type Gate interface {
	Check(ctx context.Context, r webhook.Delivery) Decision
	Record(ctx context.Context, r webhook.Delivery, c webhook.Class, probe bool)
}

// Disabler disables an endpoint of the table that answered 410 Gone and
// dead-letters its pending deliveries (and counts it).
type Disabler interface {
	Disable(ctx context.Context, endpointID, reason string) (moved int64, err error)
}

// Vetter checks a delivery before its first attempt (the event catalog's
// rules: its type known while the catalog is strict, its payload matching
// its type's schema). Vet returns nil to send it, an error wrapping
// ErrVetLater to leave it pending for a while (the rules could not be
// applied now), or any other error to dead-letter it, unsent, with the
// error's text as the reason (which never quotes the payload).
type Vetter interface {
	Vet(ctx context.Context, r webhook.Delivery) error
}

// ErrVetLater: a Vetter could not decide now; the delivery is deferred
// (NotAttemptedDelay), no attempt spent.
var ErrVetLater = errors.New("cannot be checked now")

// Hush silences producers' NOTIFYs while the worker is busy.
type Hush interface {
	Set(busy bool)
	Help()
}

type openGate struct{}

func (openGate) Check(context.Context, webhook.Delivery) Decision              { return Decision{Allow: true} }
func (openGate) Record(context.Context, webhook.Delivery, webhook.Class, bool) {}

type noHush struct{}

func (noHush) Set(bool) {}
func (noHush) Help()    {}
