// Package outbox is the store: it owns every statement on the worker's
// tables (webhook_outbox, webhook_dead_letter, webhook_attempts,
// webhook_endpoints). Each statement is a named block of a file under
// queries/ (statements.go) with a comment saying what it guarantees; the
// other packages call methods of a Store and never write SQL on these
// tables themselves (the producer kit runs its INSERT in the producer's
// transaction, but takes it from the sub-package outbox/insert, which
// imports no driver).
//
// The rules every statement shares:
//   - A row is due when it is pending, its created_at has come and no lease
//     holds it, by the database clock (written out where a statement asks).
//   - A claimed row is held by a lease (locked_until, lease_token), never
//     by an open transaction; an outcome is written only where the lease
//     token still matches (the fence).
//   - A row leaves the outbox for the dead letter with its event, endpoint
//     and headers, whichever statement moves it: each lists the same
//     columns of webhook_dead_letter (ARCHITECTURE.md).
package outbox

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store runs the statements. Safe for concurrent use; each method holds a
// connection only for its own statement.
type Store struct {
	pool *pgxpool.Pool
	// plain says the last claim found the plain path open (claim_plain):
	// the next claim tries it first.
	plain atomic.Bool
	// noEvents says the last claim's queues step found no event due: the
	// next claim runs that step alone (unless noQueues too: nextSteps),
	// and all of them once it finds one.
	noEvents atomic.Bool
	// noQueues says the last claim found no delivery in a queue (due or
	// not): the next claim runs the events' steps alone (unless noEvents
	// too), and all of them once they find one.
	noQueues atomic.Bool
	// woke is what the last claim that followed one finding nothing at all
	// took (wokeUnknown, wokeByEvents, wokeByQueue): the next such claim
	// runs the steps it calls for (nextSteps).
	woke atomic.Int32
	// flow says the last claim found something under flow control: the
	// next runs claim_flow (queries/flow.sql), not its probe.
	flow atomic.Bool
	// consoleURL is the console's base URL the operator events carry
	// (SetConsoleURL); "": none.
	consoleURL string
	// rowBuffers holds the claims' row buffers (*[]claimRow), cleared, for
	// the next claim (Claim).
	rowBuffers sync.Pool
}

// New returns a Store over pool, or an error when pool is nil.
func New(pool *pgxpool.Pool) (*Store, error) {
	if pool == nil {
		return nil, errors.New("outbox: a pool is required")
	}
	return &Store{pool: pool}, nil
}

// movedTries bounds how often a statement on pending rows runs again when
// PostgreSQL refused it because a row it had read was meanwhile moved to
// its history partition by a transaction that committed (SQLSTATE 40001,
// "tuple to be locked was already moved to another partition due to
// concurrent update"): a lease that expired while its holder recorded the
// outcome, or an event fanned out by another worker's claim. The refused
// statement changed nothing, and the next run no longer sees the row.
//
// So is a statement refused by a deadlock (40P01) or by a lock wait over
// the worker's lock_timeout (55P03): the lanes of ordering keys (migration
// 015) are locked row by row, in the order a statement meets them, so two
// workers, or a worker and a producer writing several keys in one
// transaction, may wait on each other; the statement given up runs again.
const movedTries = 5

// retryable reports whether retryMoved runs a statement refused with this
// SQLSTATE again.
func retryable(code string) bool { return code == "40001" || code == "40P01" || code == "55P03" }

// retryMoved runs f until it succeeds, fails otherwise, or has been
// refused movedTries times.
func retryMoved[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := f()
		var pgErr *pgconn.PgError
		if err == nil || i == movedTries || ctx.Err() != nil || !errors.As(err, &pgErr) || !retryable(pgErr.Code) {
			return v, err
		}
	}
}
