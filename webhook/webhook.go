// Package webhook holds the worker's domain types, once: a Delivery (one
// claimed outbox row: one delivery of an event to one endpoint), the Class
// of an HTTP attempt, the Outcome recorded for a delivery and its Kind,
// and an Endpoint of the catalog (webhook_endpoints).
// Every other package speaks these types, so nothing is converted at the
// borders; it imports only the standard library and holds no logic (the
// idea of the root package of Ben Johnson's "standard package layout").
//
// The string values of Kind, Class and Health are the ones the outbox's
// SQL reads and webhook_attempts stores, readable in psql.
package webhook

import "time"

// Token identifies one lease of one row (a uuid's 16 bytes). Outcomes are
// fenced by it: only the holder of the current lease can record one.
type Token [16]byte

// Delivery is one claimed outbox row, held under a lease until its outcome
// is recorded or it is released: one delivery of an event to one endpoint.
// The endpoint's fields are read from webhook_endpoints by the claim
// itself, so a change is seen by the next claim.
type Delivery struct {
	ID         int64
	Token      Token  // the lease; outcomes are fenced by it
	DeliveryID string // uuid text; the same on every attempt of a delivery
	EventType  string
	Payload    []byte // the JSON body, byte for byte
	Headers    []byte // the JSON object text of extra request headers; nil for none
	Attempt    int    // 1 for the first attempt
	CreatedAt  time.Time
	Reclaimed  bool // its previous lease expired without an outcome
	// OrderingKey is the row's ordering key ("" for none) and Sequence
	// its place in its lane (the key at its endpoint), 1 for the first:
	// a lane delivers one row at a time, in Sequence order.
	OrderingKey string
	Sequence    int64
	// Event is, for a delivery a fan-out handed out without writing its
	// row (the row is written with its outcome), the id of its event's
	// row, whose lease (Token) fences it; 0 for a delivery with a row of
	// its own, the usual case.
	Event int64

	// EndpointID is the endpoint's uuid text; "" for the WEBHOOK_URL
	// endpoint, whose other fields below are empty.
	EndpointID     string
	EndpointName   string
	URL            string
	Secret         string
	Enabled        bool
	DisabledReason string
	RetryRPS       int // 0: WEBHOOK_RETRY_RPS
	// PreviousSecret, until PreviousUntil (by the database clock at the
	// claim), is the secret a rotation replaced, still signing beside
	// Secret; "" and the zero time when none is in its grace period.
	PreviousSecret string
	PreviousUntil  time.Time
}

// Class is how an HTTP attempt ended; its values are the
// webhook_attempts.error_class texts and the metric labels.
type Class string

// The classes of an attempt.
const (
	// Delivered: the consumer answered 2xx.
	Delivered Class = "delivered"
	// Retryable: a network error, a timeout, response headers over the
	// limit, 408, 429 or 5xx: the same request may succeed later.
	Retryable Class = "retryable"
	// Permanent: any other status, 3xx included, or a request that cannot
	// be built or is refused by the egress guard: sending it again will not
	// help.
	Permanent Class = "permanent"
	// NotAttempted: nothing was sent, for a reason of the worker's own
	// that may pass (the endpoint's secret cannot be opened with its key
	// file): the row is deferred as a gate defers it, no attempt spent,
	// never dead-lettered for it. RetryAfter, when set, is how long.
	NotAttempted Class = "not_attempted"
)

// String is c, or "unknown" for any other value, so that it is safe as a
// bounded metric label.
func (c Class) String() string {
	switch c {
	case Delivered, Retryable, Permanent, NotAttempted:
		return string(c)
	}
	return "unknown"
}

// Result is one HTTP attempt's result.
type Result struct {
	Class      Class
	Status     int           // 0 when no response arrived
	Error      string        // short reason when not delivered; never a secret or payload
	RetryAfter time.Duration // the consumer's Retry-After (429, 503), else 0
	Duration   time.Duration
}

// Kind says what becomes of a claimed row.
type Kind string

// The kinds of Outcome.
const (
	// Done: delivered; the row is marked processed.
	Done Kind = "done"
	// Retry: the attempt failed; the row is marked processed and its next
	// attempt inserted, due after Delay.
	Retry Kind = "retry"
	// Defer: a gate refused the attempt; the row itself, the same attempt,
	// is moved to after Delay (no row is made, no attempt spent).
	Defer Kind = "defer"
	// Dead: the row is marked processed and its event moved to
	// webhook_dead_letter.
	Dead Kind = "dead"
	// Release: not attempted (shutdown); the lease ends at once and any
	// worker may claim the row.
	Release Kind = "release"
)

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
	}
	return "unknown"
}

// Health is what an attempt says of its endpoint.
type Health string

// The values of Outcome.Health.
const (
	// NoAttempt: nothing was sent (deferred, released, refused before a
	// request). The zero value.
	NoAttempt Health = ""
	// Healthy: the endpoint answered 2xx; it is failing no longer.
	Healthy Health = "healthy"
	// Failing: the attempt failed; the endpoint's run of failures goes on
	// (webhook_endpoints.failing_since, last_error).
	Failing Health = "failing"
)

// Outcome is what is recorded for one claimed row.
type Outcome struct {
	// ID and Token name the row and the lease it was claimed under.
	ID    int64
	Token Token
	Kind  Kind
	// Attempt is the attempt number of the new row (Retry), the row's own
	// (Defer), or the number of attempts made (Dead).
	Attempt int
	// Delay is how long after the write, by the database clock, the new
	// row (Retry) or the row itself (Defer) is due.
	Delay  time.Duration
	Status int    // the last HTTP status (Dead, Retry); 0 for none
	Error  string // the last error (Dead; for Retry it feeds the endpoint's health)
	// Health is what the attempt says of the row's endpoint. An outcome
	// whose Health is not NoAttempt records its attempt in
	// webhook_attempts: when it began (Started, the worker's clock), how
	// long it took, its class ("" when delivered, else "retryable" or
	// "permanent") and its own error text.
	Health       Health
	Started      time.Time
	Took         time.Duration
	AttemptClass string
	AttemptError string
	// EndpointID and OrderingKey are the row's (Delivery's), set for a row
	// with an ordering key: the write locks the lanes it moves, in order.
	// EndpointID is also set with Event and with Pause.
	EndpointID  string
	OrderingKey string
	// Event is the Delivery's Event: the outcome writes the delivery's row
	// where the event's lease (Token) still holds (the fence).
	Event int64
	// Pause, when not 0, is how long the consumer asked not to be sent to
	// (429 or 503 with Retry-After): the write pauses the row's endpoint
	// (EndpointID, set with it) for every worker.
	Pause time.Duration
}
