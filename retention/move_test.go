package retention_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/retention"
	"github.com/fluxora/webhook-worker/webhook"
)

// The backfill of the test: processed rows written straight into the
// default partitions, as an import by SQL leaves them.
const (
	backfillKept    = 985_000 // within the retention, before any partition
	backfillExpired = 10_000  // past the retention
	backfillNoTime  = 4_000   // processed_at NULL: no range takes them
	backfillAhead   = 1_000   // a month ahead: beyond the partitions made
	backfillTotal   = backfillKept + backfillExpired + backfillNoTime + backfillAhead
	attemptsKept    = 100_000
)

// backfill fills the default partitions (see above), and the attempts'
// with attemptsKept attempts of the same days.
func backfill(t *testing.T, db *testdb.DB) {
	t.Helper()
	for _, q := range []struct {
		sql string
		n   int
	}{
		// Delivery ids in order, so that their index is written at its end.
		{`INSERT INTO webhook_outbox_history_default (delivery_id, event_type, payload, processed, processed_at, created_at)
		  SELECT lpad(to_hex(g), 32, '0')::uuid, 'backfill', '{}', true, now() - interval '6 days' + g * (interval '4 days' / $1::int),
		    now() - interval '6 days'
		  FROM generate_series(0, $1::int - 1) g`, backfillKept},
		{`INSERT INTO webhook_outbox_history_default (event_type, payload, processed, processed_at, created_at)
		  SELECT 'backfill', '{}', true, now() - interval '9 days', now() - interval '9 days' FROM generate_series(1, $1::int)`, backfillExpired},
		{`INSERT INTO webhook_outbox_history_default (event_type, payload, processed, processed_at, created_at)
		  SELECT 'backfill', '{}', true, NULL, now() FROM generate_series(1, $1::int)`, backfillNoTime},
		{`INSERT INTO webhook_outbox_history_default (event_type, payload, processed, processed_at, created_at)
		  SELECT 'backfill', '{}', true, now() + interval '30 days', now() FROM generate_series(1, $1::int)`, backfillAhead},
		{`INSERT INTO webhook_attempts_default (delivery_id, attempt, started_at, duration_ms, status)
		  SELECT lpad(to_hex(g), 32, '0')::uuid, 1, now() - interval '6 days' + g * (interval '4 days' / $1::int), 1, 200
		  FROM generate_series(0, $1::int - 1) g`, attemptsKept},
	} {
		if _, err := db.Pool.Exec(context.Background(), q.sql, q.n); err != nil {
			t.Fatal(err)
		}
	}
}

// claimer claims and records, until stop, events it inserts itself, as a
// worker delivers them, and counts the rounds it completed.
type claimer struct {
	rounds atomic.Int64
	err    error
	done   chan struct{}
}

func startClaimer(t *testing.T, db *testdb.DB, stop <-chan struct{}) *claimer {
	t.Helper()
	s, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	c := &claimer{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		ctx := context.Background()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, c.err = db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload) SELECT 'live', '{}' FROM generate_series(1, 5)`); c.err != nil {
				return
			}
			var b webhook.Batch
			if b, c.err = s.Claim(ctx, webhook.Query{Limit: 5, Lease: 30 * time.Second, Env: true}); c.err != nil {
				return
			}
			out := make([]webhook.Outcome, len(b.Rows))
			for i, r := range b.Rows {
				out[i] = webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done, Health: webhook.Healthy, Started: time.Now(), Took: time.Millisecond}
			}
			if _, c.err = s.Record(ctx, out); c.err != nil {
				return
			}
			c.rounds.Add(1)
		}
	}()
	return c
}

// A million rows in the default partition, written already processed
// (a backfill): a retention round moves those within the retention into
// partitions of their time, a batch a statement, while claims and records
// go on all through it; it deletes those past the retention and leaves in
// the default only what no partition can take (no time, or beyond the
// partitions made ahead). No row is lost, and the default partition is
// left holding only those.
func TestMoveBackfillWhileClaiming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	reg := prometheus.NewRegistry()
	d, err := retention.New(retention.Config{Pool: db.Pool, Retention: 7 * 24 * time.Hour, BatchSize: 10_000, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	backfill(t, db)

	stop := make(chan struct{})
	c := startClaimer(t, db, stop)
	var (
		mu       sync.Mutex
		progress []int64 // the claimer's rounds, at each tenth of the round
	)
	began := time.Now()
	roundDone := make(chan struct{})
	go func() {
		// Samples the claimer's progress while the round runs.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-roundDone:
				return
			case <-tick.C:
				mu.Lock()
				progress = append(progress, c.rounds.Load())
				mu.Unlock()
			}
		}
	}()
	deleted, skipped, err := d.RunOnce(ctx)
	close(roundDone)
	took := time.Since(began)
	close(stop)
	<-c.done
	if c.err != nil {
		t.Fatalf("claimer: %v", c.err)
	}
	if err != nil || skipped || deleted != backfillExpired {
		t.Fatalf("round: deleted %d, skipped %v, %v; want %d deleted", deleted, skipped, err, backfillExpired)
	}
	// Claims went on all through the round: in every tenth of it, the
	// claimer completed rounds.
	mu.Lock()
	samples := progress
	mu.Unlock()
	t.Logf("the round took %v; the claimer completed %d rounds, %d samples", took, c.rounds.Load(), len(samples))
	if len(samples) < 10 {
		t.Fatalf("only %d samples of the claimer's progress", len(samples))
	}
	for i := range 10 {
		lo, hi := samples[i*len(samples)/10], samples[min((i+1)*len(samples)/10, len(samples)-1)]
		if hi <= lo {
			t.Errorf("no claim completed in the tenth %d of the round (samples %d..%d)", i+1, lo, hi)
		}
	}

	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE event_type = 'backfill'`); n != backfillTotal-backfillExpired {
		t.Errorf("%d backfilled rows left, want %d", n, backfillTotal-backfillExpired)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox_history_default`); n != backfillNoTime+backfillAhead {
		t.Errorf("the default partition holds %d rows, want %d (no time, or beyond the partitions made)", n, backfillNoTime+backfillAhead)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_attempts_default`); n != 0 {
		t.Errorf("the attempts' default partition holds %d rows, want none", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_attempts WHERE status = 200 AND duration_ms = 1`); n != attemptsKept {
		t.Errorf("%d backfilled attempts left, want %d", n, attemptsKept)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_history_staged`); n != 0 {
		t.Errorf("%d staged ranges left", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE event_type = 'live' AND NOT processed`); n != 0 {
		t.Errorf("%d of the claimer's rows not processed", n)
	}
	if got := counter(t, reg, "fluxora_webhook_retention_moved_rows_total"); got != backfillKept {
		t.Errorf("moved rows counted %v, want %d", got, backfillKept)
	}
	if got := counter(t, reg, "fluxora_webhook_retention_moved_attempts_total"); got != attemptsKept {
		t.Errorf("moved attempts counted %v, want %d", got, attemptsKept)
	}
	// Each day of the backfill is a partition of its own now.
	if n := db.Count(t, `SELECT count(*) FROM webhook_partition_bounds('webhook_outbox_history') WHERE hi <= now() - interval '1 day'`); n < 4 {
		t.Errorf("%d partitions before yesterday, want the backfill's days", n)
	}
}

// Making a partition, and attaching a staged range, read nothing under the
// parent's lock however many rows the default partition holds: PostgreSQL
// finds in the default's CHECK (added under the default's own lock) that
// no row is in the new range, and says so.
func TestNewPartitionReadsNoDefaultUnderTheParentsLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox_history_default (event_type, payload, processed, processed_at)
		SELECT 'old', '{}', true, now() - interval '20 days' + g * interval '1 second' FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	var notices []string
	cfg, err := pgx.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	implied := func(what string) {
		t.Helper()
		for _, n := range notices {
			if strings.Contains(n, `default partition "webhook_outbox_history_default" is implied by existing constraints`) {
				notices = nil
				return
			}
		}
		t.Errorf("%s: no proof that the default holds no row of the range; notices:\n%s", what, strings.Join(notices, "\n"))
		notices = nil
	}
	for _, q := range []string{
		"SET client_min_messages = debug1",
		`SELECT webhook_history_prepare('webhook_outbox_history', interval '1 day', now() + interval '10 days', now() + interval '10 days' + interval '1 second')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	implied("a partition made ahead")
	var moved int
	if err := conn.QueryRow(ctx, `SELECT webhook_history_move('webhook_outbox_history', interval '1 day', now() - interval '30 days', now(), 100000)`).Scan(&moved); err != nil || moved == 0 {
		t.Fatalf("move: %d, %v", moved, err)
	}
	notices = nil
	var name *string
	if err := conn.QueryRow(ctx, `SELECT webhook_history_attach('webhook_outbox_history', 1000)`).Scan(&name); err != nil || name == nil {
		t.Fatalf("attach: %v, %v", name, err)
	}
	implied("a staged range attached")
}
