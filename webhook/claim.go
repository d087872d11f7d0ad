package webhook

import (
	"strconv"
	"time"
)

// Query is what one claim asks for.
type Query struct {
	// Limit is the most rows (at least 1).
	Limit int
	// Lease is how long, by the database clock, the claim holds its rows.
	Lease time.Duration
	// Skip lists endpoints (uuid text) whose rows the claim leaves alone
	// and does not read: those at their limit in this worker, or parked
	// while their breaker is open.
	Skip []string
	// Room gives, by endpoint (uuid text), the most rows the claim takes
	// of that endpoint; DefaultRoom is the room of any other endpoint
	// (0: Limit).
	Room        map[string]int
	DefaultRoom int
	// EnvRoom is the most rows of the WEBHOOK_URL endpoint (0: Limit);
	// SkipEnv leaves its deliveries alone. Events still in want of
	// fan-out are claimed anyway.
	EnvRoom int
	SkipEnv bool
	// Env says the worker delivers to a WEBHOOK_URL endpoint: an event's
	// own row is then that endpoint's delivery. Without it, an event is
	// only fanned out to the endpoints of webhook_endpoints.
	Env bool
	// EnvFlow is the WEBHOOK_URL endpoint's flow control (WEBHOOK_RATE,
	// WEBHOOK_MAX_IN_FLIGHT); the zero Flow is none.
	EnvFlow Flow
}

// Flow is an endpoint's flow control, held across every worker: at most
// Rate requests every Per (a second or a minute) with Burst more at once,
// and at most MaxInFlight requests at a time. A zero Rate or MaxInFlight
// is no such limit.
type Flow struct {
	Rate        int
	Per         time.Duration
	Burst       int
	MaxInFlight int
}

// Limited says f limits anything.
func (f Flow) Limited() bool { return f.Rate > 0 || f.MaxInFlight > 0 }

// RateSpec is f's rate as --rate takes it: "50/s", "50/m"; "" without one.
func (f Flow) RateSpec() string {
	switch {
	case f.Rate <= 0:
		return ""
	case f.Per == time.Minute:
		return strconv.Itoa(f.Rate) + "/m"
	}
	return strconv.Itoa(f.Rate) + "/s"
}

// RateShown is RateSpec with the burst, as the list, status and console
// show it: "50/s+10"; "" without a rate.
func (f Flow) RateShown() string {
	s := f.RateSpec()
	if s != "" && f.Burst > 0 {
		s += "+" + strconv.Itoa(f.Burst)
	}
	return s
}

// Batch is what one claim returns.
type Batch struct {
	// Rows are the deliveries leased to the caller, oldest first: rows of
	// the endpoints' queues and deliveries fanned out by this claim. Those
	// of a fan-out in flight (Event set) share their event's Payload and
	// Headers: read only.
	Rows []Delivery
	// Taken is how many queue rows and events the claim took: Rows but the
	// fresh ones, the broken ones, and the events it fanned out.
	Taken int
	// More says rows were left that the claim could have taken with a
	// higher Limit: claim again.
	More bool
	// FannedOut is how many events the claim fanned out; Deliveries how
	// many endpoint delivery rows that made, of which Fresh are in Rows
	// (leased at once) and the others pending, due at once.
	FannedOut, Deliveries, Fresh int
	// Unrouted lists the event types of events the claim found no
	// endpoint for: they are recorded processed with fanout 0.
	Unrouted []string
	// Broken lists the leased rows the worker could not decode (a time
	// the schema would refuse): they are not in Rows, and were moved to
	// the dead letter, each with its Reason, in a statement of their own.
	Broken []Broken
	// BrokenErr is the error of that move, if it failed: the broken rows
	// then stay leased, to be claimed again when their lease ends.
	BrokenErr error
	// FlowWait, when not 0, is how soon an endpoint under flow control
	// that this claim could take nothing of (paused, out of tokens, at its
	// most in flight) may be granted some: claim again by then.
	FlowWait time.Duration
}

// Broken is a claimed row the worker could not decode: Claim moves it to
// the dead letter alone, with Reason, and delivers its batch mates.
type Broken struct {
	ID         int64
	DeliveryID string
	Reason     string
}
