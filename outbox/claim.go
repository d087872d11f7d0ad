package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fluxora/webhook-worker/webhook"
)

// nextDueMaxMS caps what NextDue returns: a day, in milliseconds.
const nextDueMaxMS = 24 * 60 * 60 * 1000

// Claim leases due rows (see webhook.Query), fanning out the events among
// them, in one round trip. While the claims find the plain path open
// (claim_plain: the events go to the WEBHOOK_URL endpoint alone) the claim
// is that one statement; else it is the statements claim_queues,
// claim_events and claim_fan_out (queries/claim.sql), sent together and
// run in one transaction, which say whether the next claim may try the
// plain path, and whether it may leave out the queues' step (no queue
// holds a delivery) or the events' (no event is due). It returns an empty
// Batch and no error when nothing is due.
func (s *Store) Claim(ctx context.Context, q webhook.Query) (webhook.Batch, error) {
	var wait time.Duration
	buf := s.rowsBuffer()
	rows, err := retryMoved(ctx, func() ([]claimRow, error) {
		wait = 0
		// The plain path does not hold the WEBHOOK_URL endpoint to flow
		// control: with limits of its own it is not tried.
		if q.Env && !q.SkipEnv && !q.EnvFlow.Limited() && s.plain.Load() {
			rows, err := s.claimRows(ctx, (*buf)[:0], q, claimPlain)
			if err != nil || len(rows) > 0 {
				// Open: it took what there was, or says nothing is due.
				s.plain.Store(err == nil)
				return rows, err
			}
		}
		idle := s.noEvents.Load() && s.noQueues.Load()
		steps, leftOutDue := s.nextSteps()
		rows, err := s.claimFlowing(ctx, (*buf)[:0], q, &wait, steps...)
		if err == nil && leftOutDue(rows) {
			if !tookAny(rows) {
				// What they left out has work and nothing else did: every
				// step, now.
				rows, err = s.claimFlowing(ctx, (*buf)[:0], q, &wait, claimSteps...)
			} else {
				// The dispatcher claims again at once, every step (or the
				// plain path, if the rows taken open it: it looks at the
				// queues and the events itself).
				rows = append(rows, claimRow{State: stateStatus, More: true, EventsDue: true, Queued: true, Plain: true})
			}
		}
		if idle && err == nil && tookAny(rows) {
			s.woke.Store(wokeBy(rows))
		}
		s.plain.Store(err == nil && plainOpen(rows))
		s.noEvents.Store(err == nil && !eventsDue(rows))
		s.noQueues.Store(err == nil && !queued(rows))
		return rows, err
	})
	if err != nil {
		return webhook.Batch{}, err
	}
	b, tokens, err := batchOf(rows, q)
	s.keepRows(buf, rows)
	if err != nil {
		return webhook.Batch{}, err
	}
	// Pending deliveries of this fan-out are due at once.
	b.More = b.More || b.Deliveries > b.Fresh
	b.FlowWait = wait
	if len(b.Broken) > 0 {
		// Its batch mates are leased already and go on.
		b.BrokenErr = s.deadLetterBroken(ctx, b.Broken, tokens)
	}
	// UPDATE … RETURNING has no order of its own.
	slices.SortFunc(b.Rows, func(a, b webhook.Delivery) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return b, nil
}

// nextSteps returns the steps the next claim runs, and leftOutDue, which
// says whether rows of those steps show that the steps left out have work
// after all. A claim leaves a step out while the claim before found work
// for the other one alone. After a claim that found nothing at all, what
// wakes the next (an event or a queue's delivery) is guessed from the
// last such wake: the events' steps alone when it brought events alone,
// the queues' step alone when it brought a queue's delivery alone, else
// (both, or nothing learned yet) every step. A wrong guess costs a second
// round trip, and the next guess follows it.
func (s *Store) nextSteps() (steps []named, leftOutDue func([]claimRow) bool) {
	noEvents, noQueues := s.noEvents.Load(), s.noQueues.Load()
	woke := wokeUnknown
	if noEvents && noQueues {
		woke = s.woke.Load()
	}
	switch {
	case noEvents && !noQueues || woke == wokeByQueue:
		// The claim before found no event due: the queues' step alone.
		return claimSteps[:1], eventsDue
	case noQueues && !noEvents || woke == wokeByEvents:
		// The claim before found no delivery in a queue: the events' steps
		// alone.
		return claimSteps[1:], queued
	}
	return claimSteps, func([]claimRow) bool { return false }
}

// What the claim after one that found nothing took (Store.woke).
const (
	wokeUnknown int32 = iota
	wokeByEvents
	wokeByQueue
)

// wokeBy says what a claim's rows took: events alone, a queue's
// deliveries alone, or both (wokeUnknown).
func wokeBy(rows []claimRow) int32 {
	queue := slices.ContainsFunc(rows, func(r claimRow) bool { return r.State == stateQueue })
	event := slices.ContainsFunc(rows, func(r claimRow) bool { return r.State != stateQueue && r.State != stateStatus })
	switch {
	case queue && !event:
		return wokeByQueue
	case event && !queue:
		return wokeByEvents
	}
	return wokeUnknown
}

// plainOpen says whether rows of the claim's steps open the plain path:
// every row says so (its plain column: claim_queues's, a status row
// included, for the endpoints' queues; claim_events's for the events it
// took), and the claim took an event, the WEBHOOK_URL endpoint's alone. A
// claim that took no event shows nothing of where the events go and
// leaves the path closed.
func plainOpen(rows []claimRow) bool {
	event := false
	for _, r := range rows {
		if !r.Plain {
			return false
		}
		event = event || r.State == stateEventLeased || r.State == stateEvent
	}
	return event
}

// tookAny says whether a claim's steps took anything.
func tookAny(rows []claimRow) bool {
	return slices.ContainsFunc(rows, func(r claimRow) bool { return r.State != stateStatus })
}

// queued says whether the rows of a claim's steps leave a delivery in a
// queue (claim_queues and claim_events always return a row that says it).
func queued(rows []claimRow) bool {
	return slices.ContainsFunc(rows, func(r claimRow) bool { return r.Queued })
}

// eventsDue says whether the rows of a claim's steps leave an event due
// (claim_queues always returns a row that says it).
func eventsDue(rows []claimRow) bool {
	for _, r := range rows {
		if r.EventsDue {
			return true
		}
	}
	return false
}

// claimPlain is the claim of the plain path.
var claimPlain = statement("claim_plain")

// The claim's steps, in the order they run.
var claimSteps = []named{statement("claim_queues"), statement("claim_events"), statement("claim_fan_out")}

// claimRow is a row of a claim's step: what became of a delivery or an
// event (State), and the delivery as the worker needs it.
type claimRow struct {
	ID             int64              `db:"id"`
	Token          webhook.Token      `db:"lease_token"`
	DeliveryID     string             `db:"delivery_id"`
	EventType      string             `db:"event_type"`
	Payload        []byte             `db:"payload"`
	Headers        []byte             `db:"headers"`
	Attempt        int                `db:"attempt"`
	CreatedAt      pgtype.Timestamptz `db:"created_at"`
	Reclaimed      bool               `db:"reclaimed"`
	OrderingKey    string             `db:"ordering_key"`
	Sequence       int64              `db:"ordering_seq"`
	Event          int64              `db:"event"`
	State          string             `db:"state"`
	Fanout         int                `db:"fanout"`
	EndpointID     string             `db:"endpoint_id"`
	EndpointName   string             `db:"endpoint_name"`
	URL            string             `db:"url"`
	Secret         string             `db:"secret"`
	Enabled        bool               `db:"enabled"`
	DisabledReason string             `db:"disabled_reason"`
	RetryRPS       int                `db:"retry_rps"`
	PreviousSecret string             `db:"previous_secret"`
	PreviousUntil  pgtype.Timestamptz `db:"previous_until"`
	More           bool               `db:"more"`
	// Plain says the plain path may be tried next (claimPlain).
	Plain bool `db:"plain"`
	// EventsDue says an event may be due (claim_queues looks; so does
	// claim_events's status row; the others say true).
	EventsDue bool `db:"events_due"`
	// Queued says a queue may hold a delivery, due or not (claim_queues and
	// claim_events look; the others say true).
	Queued bool `db:"queued"`
}

// claimRowsCap is the room a claim's first row buffer starts with: a
// claim of a quiet moment returns a row or two, and a claimRow is large (a
// hundred of them are a large allocation, cleared). A busy claim grows the
// buffer, and the claims after it reuse it (Store.rowBuffers): a drain
// makes no row buffer per claim.
const claimRowsCap = 8

// rowsBuffer returns a row buffer for a claim, empty, whose rows the
// claim appends to it; keepRows gives it back once the claim's Batch
// holds what it needs of them.
func (s *Store) rowsBuffer() *[]claimRow {
	if buf, ok := s.rowBuffers.Get().(*[]claimRow); ok {
		return buf
	}
	buf := make([]claimRow, 0, claimRowsCap)
	return &buf
}

// keepRows gives buf back to the pool, cleared over its whole capacity (no
// payload or secret outlives its claim through it); rows, the claim's,
// replace it when appending them outgrew it. A claim that failed drops
// its buffer.
func (s *Store) keepRows(buf *[]claimRow, rows []claimRow) {
	if cap(rows) > cap(*buf) {
		*buf = rows[:0]
	}
	clear((*buf)[:cap(*buf)])
	s.rowBuffers.Put(buf)
}

// claimRowFields is how many fields claimRow has, each a column.
const claimRowFields = 27

func (r *claimRow) field(col string) any {
	switch col {
	case "id":
		return &r.ID
	case "lease_token":
		return &r.Token
	case "delivery_id":
		return &r.DeliveryID
	case "event_type":
		return &r.EventType
	case "payload":
		return &r.Payload
	case "headers":
		return &r.Headers
	case "attempt":
		return &r.Attempt
	case "created_at":
		return &r.CreatedAt
	case "reclaimed":
		return &r.Reclaimed
	case "ordering_key":
		return &r.OrderingKey
	case "ordering_seq":
		return &r.Sequence
	case "event":
		return &r.Event
	case "state":
		return &r.State
	case "fanout":
		return &r.Fanout
	case "endpoint_id":
		return &r.EndpointID
	case "endpoint_name":
		return &r.EndpointName
	case "url":
		return &r.URL
	case "secret":
		return &r.Secret
	case "enabled":
		return &r.Enabled
	case "disabled_reason":
		return &r.DisabledReason
	case "retry_rps":
		return &r.RetryRPS
	case "previous_secret":
		return &r.PreviousSecret
	case "previous_until":
		return &r.PreviousUntil
	case "more":
		return &r.More
	case "plain":
		return &r.Plain
	case "events_due":
		return &r.EventsDue
	case "queued":
		return &r.Queued
	}
	return nil
}

// The states of a claimRow.
const (
	// stateQueue: a delivery of an endpoint's queue, leased.
	stateQueue = "queue"
	// stateFresh: a delivery this claim made, leased.
	stateFresh = "fresh"
	// stateEventLeased: an event fanned out whose own row is the
	// WEBHOOK_URL endpoint's delivery, leased.
	stateEventLeased = "event_leased"
	// stateEvent: an event fanned out (or unrouted: fanout 0), its row not
	// leased.
	stateEvent = "event"
	// stateEventInFlight: an event leased whole, a fan-out in flight: its
	// deliveries (stateFresh, Event its id) share its payload and headers.
	stateEventInFlight = "event_in_flight"
	// stateToFanOut: an event claim_events handed to claim_fan_out, which
	// returns it again.
	stateToFanOut = "to_fan_out"
	// stateStatus: claim_plain's row when its path is open and nothing is
	// due.
	stateStatus = "status"
)

// The statements of flow control (queries/flow.sql) that run before and
// after the claim's steps.
var claimFlow, claimFlowProbe, claimSettle = statement("claim_flow"), statement("claim_flow_probe"), statement("claim_settle")

// flowRow is claim_flow's row (and claim_flow_probe's), and
// claim_settle's (settled alone).
type flowRow struct {
	Granted bool `db:"granted"`
	// WaitMS is how soon an endpoint granted nothing may be granted some.
	WaitMS *int64 `db:"wait_ms"`
	Made   int64  `db:"made"`
	// Flow says something is under flow control.
	Flow    bool  `db:"flow"`
	Settled int64 `db:"settled"`
}

func (r *flowRow) field(col string) any {
	switch col {
	case "granted":
		return &r.Granted
	case "wait_ms":
		return &r.WaitMS
	case "made":
		return &r.Made
	case "flow":
		return &r.Flow
	case "settled":
		return &r.Settled
	}
	return nil
}

// claimFlowing runs the claim's steps between claim_flow and claim_settle,
// all together, and returns the steps' rows appended to out; wait is set
// to claim_flow's wait_ms. While the claims before found nothing under
// flow control, the steps run after claim_flow_probe alone, which costs
// less; when it finds something they take nothing, and run again at once
// with claim_flow.
func (s *Store) claimFlowing(ctx context.Context, out []claimRow, q webhook.Query, wait *time.Duration, steps ...named) ([]claimRow, error) {
	flowing := s.flow.Load() || q.EnvFlow.Limited()
	rows, flow, err := s.claimWith(ctx, out, q, wait, flowing, steps)
	if err == nil && (!flowing && flow.Flow || flow.Made > 0) {
		// Flow control found, or an endpoint's state made, by a claim that
		// could grant nothing: once more, granting (the rows the first
		// took, events fanned out to pending deliveries, are kept).
		rows, _, err = s.claimWith(ctx, rows, q, wait, true, steps)
	}
	return rows, err
}

// claimWith runs steps between claim_flow and claim_settle (flowing), or
// after claim_flow_probe, appends their rows to out, and returns the
// first's row too.
func (s *Store) claimWith(ctx context.Context, out []claimRow, q webhook.Query, wait *time.Duration, flowing bool, steps []named) (
	_ []claimRow, flow flowRow, err error,
) {
	params := claimArgs(q)
	batch := &pgx.Batch{}
	all := append([]named{byIndexStmt, claimFlowProbe}, steps...)
	if flowing {
		all = append(append([]named{byIndexStmt, claimFlow}, steps...), claimSettle)
	}
	for _, st := range all {
		args, err := st.args(params)
		if err != nil {
			return nil, flow, fmt.Errorf("claim: %w", err)
		}
		batch.Queue(st.sql, args...)
	}
	br := s.pool.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, flow, fmt.Errorf("claim: %w", err)
	}
	if flow, err = readFlow(br, 4); err != nil {
		return nil, flow, fmt.Errorf("claim: %w", err)
	}
	s.flow.Store(flow.Flow)
	*wait = 0
	if flow.WaitMS != nil {
		*wait = time.Duration(min(max(*flow.WaitMS, 1), nextDueMaxMS)) * time.Millisecond
	}
	for range steps {
		rows, err := br.Query()
		if err == nil {
			out, err = appendByName(out, rows, claimRowFields)
		}
		if err != nil {
			return nil, flow, fmt.Errorf("claim: %w", err)
		}
	}
	if flowing {
		if _, err := readFlow(br, 1); err != nil {
			return nil, flow, fmt.Errorf("claim: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, flow, fmt.Errorf("claim: %w", err)
	}
	return out, flow, nil
}

// readFlow reads the one row of the batch's next result, of columns
// columns of flowRow's.
func readFlow(br pgx.BatchResults, columns int) (flowRow, error) {
	rows, err := br.Query()
	if err != nil {
		return flowRow{}, err
	}
	got, err := appendByName([]flowRow(nil), rows, columns)
	if err != nil {
		return flowRow{}, err
	}
	if len(got) != 1 {
		return flowRow{}, fmt.Errorf("flow control returned %d rows, not 1", len(got))
	}
	return got[0], nil
}

// claimRows runs steps, together, and returns their rows appended to out.
func (s *Store) claimRows(ctx context.Context, out []claimRow, q webhook.Query, steps ...named) ([]claimRow, error) {
	named := claimArgs(q)
	if len(steps) == 1 {
		// One statement needs no batch.
		args, err := steps[0].args(named)
		if err == nil {
			var rows pgx.Rows
			if rows, err = s.pool.Query(ctx, steps[0].sql, args...); err == nil {
				out, err = appendByName(out, rows, claimRowFields)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		return out, nil
	}
	batch := &pgx.Batch{}
	for _, st := range steps {
		args, err := st.args(named)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		batch.Queue(st.sql, args...)
	}
	br := s.pool.SendBatch(ctx, batch)
	for range steps {
		rows, err := br.Query()
		if err == nil {
			out, err = appendByName(out, rows, claimRowFields)
		}
		if err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("claim: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}

// batchOf makes the Batch of a claim's rows; the tokens are those of the
// batch's broken rows.
func batchOf(rows []claimRow, q webhook.Query) (b webhook.Batch, brokenTokens []webhook.Token, err error) {
	b = webhook.Batch{Rows: make([]webhook.Delivery, 0, len(rows))}
	// The payload and headers of a fan-out in flight come once, on its
	// event's row, for all its deliveries (which share them: read only).
	type body struct{ payload, headers []byte }
	var shared map[int64]body
	for i := range rows {
		r := &rows[i]
		b.More = b.More || r.More
		switch r.State {
		case stateToFanOut, stateStatus:
			continue
		case stateFresh:
			b.Fresh++
		default:
			b.Taken++
		}
		switch r.State {
		case stateEvent, stateEventLeased, stateEventInFlight:
			b.FannedOut++
			b.Deliveries += r.Fanout
			if q.Env && !strings.HasPrefix(r.EventType, webhook.OperatorTypes) {
				b.Deliveries-- // the event row itself, the WEBHOOK_URL endpoint's delivery
			}
			if r.Fanout == 0 {
				b.Unrouted = append(b.Unrouted, r.EventType)
			}
		}
		if r.State == stateEventInFlight {
			if shared == nil {
				shared = map[int64]body{}
			}
			shared[r.ID] = body{r.Payload, r.Headers}
			continue
		}
		if r.State == stateEvent {
			continue
		}
		d := r.delivery()
		if err := decodeTimes(&d, r.CreatedAt, r.PreviousUntil); err != nil {
			b.Broken = append(b.Broken, webhook.Broken{ID: r.ID, DeliveryID: r.DeliveryID, Reason: "the worker cannot handle this row: " + err.Error()})
			brokenTokens = append(brokenTokens, r.Token)
			continue
		}
		b.Rows = append(b.Rows, d)
	}
	for i := range b.Rows {
		if ev := b.Rows[i].Event; ev != 0 {
			e, ok := shared[ev]
			if !ok {
				return webhook.Batch{}, nil, fmt.Errorf("claim: delivery %s without its event's payload", b.Rows[i].DeliveryID)
			}
			b.Rows[i].Payload, b.Rows[i].Headers = e.payload, e.headers
		}
	}
	return b, brokenTokens, nil
}

// delivery is r as the worker delivers it (its times decoded apart).
func (r *claimRow) delivery() webhook.Delivery {
	return webhook.Delivery{ID: r.ID, Token: r.Token, DeliveryID: r.DeliveryID, EventType: r.EventType,
		Payload: r.Payload, Headers: r.Headers, Attempt: r.Attempt, Reclaimed: r.Reclaimed,
		OrderingKey: r.OrderingKey, Sequence: r.Sequence, Event: r.Event,
		EndpointID: r.EndpointID, EndpointName: r.EndpointName, URL: r.URL, Secret: r.Secret, Enabled: r.Enabled,
		DisabledReason: r.DisabledReason, RetryRPS: r.RetryRPS, PreviousSecret: r.PreviousSecret}
}

// claimArgs names the claim's parameters.
func claimArgs(q webhook.Query) pgx.NamedArgs {
	skip := q.Skip
	if skip == nil {
		skip = []string{}
	}
	room := q.Room
	if room == nil {
		room = map[string]int{}
	}
	envRoom := cmp.Or(q.EnvRoom, q.Limit)
	if q.SkipEnv || !q.Env {
		envRoom = 0
	}
	f := q.EnvFlow
	return pgx.NamedArgs{"limit": q.Limit, "lease_ms": q.Lease.Milliseconds(), "skip": skip, "room": room,
		"default_room": cmp.Or(q.DefaultRoom, q.Limit), "env_room": envRoom, "env": q.Env,
		"env_rate": f.Rate, "env_period_s": max(int(f.Per/time.Second), 1), "env_burst": f.Burst, "env_max_in_flight": f.MaxInFlight}
}

// decodeTimes sets r's times from the claim's, or says why the worker
// cannot handle them. A previous secret's end out of range ends its grace
// period at once.
func decodeTimes(r *webhook.Delivery, createdAt, prevUntil pgtype.Timestamptz) error {
	t, err := timeOf("created_at", createdAt)
	if err != nil {
		return err
	}
	r.CreatedAt = t
	r.PreviousUntil = time.Time{}
	if until, err := timeOf("secret_previous_until", prevUntil); err == nil {
		r.PreviousUntil = until
	} else {
		r.PreviousSecret = ""
	}
	return nil
}

// nextDueSQL is the statement next_due (queries/next_due.sql).
var nextDueSQL = rawStatement("next_due")

// NextDue returns how long, by the database clock, until the earliest
// scheduled (not yet due) pending row is due, at most a day; ok is false
// when there is none.
func (s *Store) NextDue(ctx context.Context) (d time.Duration, ok bool, err error) {
	var ms *int64
	if err := s.pool.QueryRow(ctx, nextDueSQL).Scan(&ms); err != nil {
		return 0, false, fmt.Errorf("next due: %w", err)
	}
	if ms == nil {
		return 0, false, nil
	}
	// A row due centuries from now would overflow a Duration: a day is as
	// good, the dispatcher asks again long before.
	return time.Duration(min(max(*ms, 0), nextDueMaxMS)) * time.Millisecond, true, nil
}
