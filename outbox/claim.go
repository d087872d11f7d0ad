package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fluxora/webhook-worker/webhook"
)

// nextDueMaxMS caps what NextDue returns: a day, in milliseconds.
const nextDueMaxMS = 24 * 60 * 60 * 1000

// Claim leases due rows (see webhook.Query and ClaimSQL), fanning out the
// events among them, in one statement and one round trip. It returns an
// empty Batch and no error when nothing is due.
func (s *Store) Claim(ctx context.Context, q webhook.Query) (webhook.Batch, error) {
	type claimed struct {
		b      webhook.Batch
		tokens []webhook.Token
	}
	// The plain path is tried while the claims find it open: it says so
	// also when nothing is due (its status row), so that an empty claim is
	// one statement. Closed, it takes nothing, and the claim runs.
	c, err := retryMoved(ctx, func() (claimed, error) {
		if q.Env && !q.SkipEnv && s.plain.Load() {
			b, tokens, open, err := s.claim(ctx, plainClaimStmt, q)
			if err != nil || open {
				s.plain.Store(err == nil)
				return claimed{b, tokens}, err
			}
		}
		b, tokens, plain, err := s.claim(ctx, claimStmt, q)
		s.plain.Store(plain)
		return claimed{b, tokens}, err
	})
	if err != nil {
		return webhook.Batch{}, err
	}
	b := c.b
	// Pending deliveries of this fan-out are due at once.
	b.More = b.More || b.Deliveries > b.Fresh
	if len(b.Broken) > 0 {
		// Its batch mates are leased already and go on.
		b.BrokenErr = s.deadLetterBroken(ctx, b.Broken, c.tokens)
	}
	// UPDATE … RETURNING has no order of its own.
	slices.SortFunc(b.Rows, func(a, b webhook.Delivery) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return b, nil
}

// claimStmt and plainClaimStmt are ClaimSQL and PlainClaimSQL with their
// arguments numbered.
var (
	claimStmt      = mustNamed(ClaimSQL)
	plainClaimStmt = mustNamed(PlainClaimSQL)
)

// claim runs a claim statement (ClaimSQL or PlainClaimSQL) once and reads
// its rows; the tokens are those of the batch's broken rows, plain is the
// statement's plain column (false without rows; PlainClaimSQL's status row
// says it when it took nothing).
func (s *Store) claim(ctx context.Context, stmt named, q webhook.Query) (b webhook.Batch, brokenTokens []webhook.Token, plain bool, err error) {
	args, err := stmt.args(claimArgs(q))
	if err != nil {
		return webhook.Batch{}, nil, false, fmt.Errorf("claim: %w", err)
	}
	rows, err := s.pool.Query(ctx, stmt.sql, args...)
	if err != nil {
		return webhook.Batch{}, nil, false, fmt.Errorf("claim: %w", err)
	}
	// Rows has room for the rows of a usual claim: grown from nothing by
	// append, it copied a claim's rows (300 bytes each) about twice. Not
	// the whole Limit, which can be thousands of slots for one row.
	b = webhook.Batch{Rows: make([]webhook.Delivery, 0, min(q.Limit, 128))}
	var r webhook.Delivery
	var leased, fan, fresh bool
	// The payload and headers of a fan-out in flight come once, on its
	// event's row, for all its deliveries (which share them: read only).
	type body struct{ payload, headers []byte }
	var shared map[int64]body
	var fanout int
	var createdAt, prevUntil pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Token, &r.DeliveryID, &r.EventType, &r.Payload, &r.Headers, &r.Attempt, &createdAt, &r.Reclaimed,
		&r.EndpointID, &r.EndpointName, &r.URL, &r.Secret, &r.Enabled, &r.DisabledReason, &r.RetryRPS,
		&r.PreviousSecret, &prevUntil, &leased, &fan, &fanout, &fresh, &b.More, &r.OrderingKey, &r.Sequence, &plain, &r.Event}, func() error {
		if !leased && !fan {
			// PlainClaimSQL's status row (open, nothing due): every row of
			// a claim is leased or an event it fanned out. Not told by its
			// id 0, which a producer may write.
			return nil
		}
		if fan && !leased && r.Payload != nil {
			if shared == nil {
				shared = map[int64]body{}
			}
			shared[r.ID] = body{r.Payload, r.Headers}
		}
		if fresh {
			b.Fresh++
		} else {
			b.Taken++
		}
		if fan {
			b.FannedOut++
			b.Deliveries += fanout
			if q.Env {
				b.Deliveries-- // the event row itself
			}
			if fanout == 0 {
				b.Unrouted = append(b.Unrouted, r.EventType)
			}
		}
		if leased {
			if err := decodeTimes(&r, createdAt, prevUntil); err != nil {
				b.Broken = append(b.Broken, webhook.Broken{ID: r.ID, DeliveryID: r.DeliveryID, Reason: "the worker cannot handle this row: " + err.Error()})
				brokenTokens = append(brokenTokens, r.Token)
			} else {
				b.Rows = append(b.Rows, r)
			}
		}
		r.Payload, r.Headers = nil, nil // the next row scans into fresh slices
		return nil
	})
	if err != nil {
		return webhook.Batch{}, nil, false, fmt.Errorf("claim: %w", err)
	}
	for i := range b.Rows {
		if ev := b.Rows[i].Event; ev != 0 {
			e, ok := shared[ev]
			if !ok {
				return webhook.Batch{}, nil, false, fmt.Errorf("claim: delivery %s without its event's payload", b.Rows[i].DeliveryID)
			}
			b.Rows[i].Payload, b.Rows[i].Headers = e.payload, e.headers
		}
	}
	return b, brokenTokens, plain, nil
}

// claimArgs names ClaimSQL's parameters.
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
	return pgx.NamedArgs{"limit": q.Limit, "lease_ms": q.Lease.Milliseconds(), "skip": skip, "room": room,
		"default_room": cmp.Or(q.DefaultRoom, q.Limit), "env_room": envRoom, "env": q.Env}
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
