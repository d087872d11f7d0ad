package outbox_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// historyDays is how many day partitions the reads are planned over, and
// dayRows the rows of each (enough that reading one whole costs more than
// a probe for each endpoint, as in any real partition).
const (
	historyDays = 30
	dayRows     = 6000
)

// dayPartitionsAroundNow makes day-wide partitions of parent from days
// days before now to a day after, bounded at half a day either side of
// the hour of now: now is in the middle of its partition whatever the hour
// of the day, so that the newest partition holds half a day of a history
// that ends now, never the few minutes after midnight UTC (a planner
// rightly reads a partition of a few pages whole, and the last hour is
// then all of it).
func dayPartitionsAroundNow(t *testing.T, db *testdb.DB, parent string, days int) {
	t.Helper()
	exec(t, db, `SELECT webhook_history_create($1::regclass, x.lo + k * interval '1 day', x.lo + (k + 1) * interval '1 day')
		FROM (SELECT date_trunc('hour', now()) - interval '12 hours' AS lo) x, generate_series(-$2::int, 1) k
		ORDER BY k`, parent, days)
}

// readsHistory makes day partitions of both histories from historyDays
// days ago to tomorrow, now in the middle of one (dayPartitionsAroundNow),
// and fills them up to now, and the default partitions too, with dayRows
// rows a day, and the last day with 20,000 attempts more (the figures of
// the last hour read a twelfth of the newest partition's); then analyzes
// them. It returns a delivery id of the history, with its attempts.
func readsHistory(t *testing.T, db *testdb.DB) (delivery string) {
	t.Helper()
	for _, parent := range outbox.HistoryParents {
		dayPartitionsAroundNow(t, db, parent, historyDays)
	}
	exec(t, db, `INSERT INTO webhook_endpoints (name, url, secret) SELECT 'e' || g, 'https://h.example.com/' || g, 'whsec_x' FROM generate_series(1, 10) g`)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at, created_at, endpoint_id)
		SELECT 'e', '{}', true, t, t, e.ids[1 + g % 10]
		FROM generate_series(1, $1::int * $2::int) g,
		  LATERAL (SELECT now() - g * (interval '1 day' / $2::int) AS t) x,
		  (SELECT array_agg(id ORDER BY name) AS ids FROM webhook_endpoints) e`, historyDays, dayRows)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at) SELECT 'e', '{}', true, NULL FROM generate_series(1, $1::int)`, dayRows)
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status)
		SELECT h.delivery_id, h.endpoint_id, 1, coalesce(h.processed_at, now() + interval '300 days'), 5 + h.id % 400, 200
		FROM webhook_outbox h`)
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status)
		SELECT gen_random_uuid(), e.ids[1 + g % 10], 1, now() - g * interval '4.32 seconds', 5 + g % 400, 200
		FROM generate_series(1, 20000) g, (SELECT array_agg(id ORDER BY name) AS ids FROM webhook_endpoints) e`)
	exec(t, db, `ANALYZE webhook_outbox, webhook_attempts, webhook_endpoints`)
	if err := db.Pool.QueryRow(context.Background(), `SELECT delivery_id::text FROM webhook_outbox
		WHERE processed AND processed_at < now() - interval '20 days' LIMIT 1`).Scan(&delivery); err != nil {
		t.Fatal(err)
	}
	return delivery
}

// The operators' reads of the history find a delivery through the
// delivery_id indexes of the partitions, one probe each, and read the last
// hour through the time indexes: over forty day partitions, every one
// holding rows, with custom and generic plans alike (the console's and the
// command's driver prepares them), no plan reads a partition of the
// histories whole. A delivery's lookup touches a few pages a partition; the
// last hour's figures a small part of the day's partition.
func TestHistoryReadsUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	delivery := readsHistory(t, db)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var now time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	lit := func(t time.Time) string { return "'" + t.UTC().Format(time.RFC3339Nano) + "'" }
	hour := lit(now.Add(-time.Hour))
	event := "'" + "6f1c2b1e-0000-4000-8000-000000000001" + "'"
	// The bounds: a few pages a partition for a delivery (an index probe
	// each), one probe more for each endpoint for an event; a quarter of
	// the day's partition for the last hour (a twenty-fourth of its rows).
	parts := db.Count(t, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'webhook_attempts'::regclass`)
	day := db.Count(t, `SELECT c.relpages FROM pg_class c JOIN webhook_partition_bounds('webhook_attempts') b ON b.part = c.oid
		WHERE b.lo <= now() AND now() < b.hi`)
	probes, hourly := 3*parts, day/4
	reads := []struct {
		name, statement string
		args            pgx.NamedArgs
		most            int // buffers the statement may touch
	}{
		{"delivery_state", "delivery_state", pgx.NamedArgs{"id": "'" + delivery + "'"}, probes},
		{"delivery_attempts", "delivery_attempts", pgx.NamedArgs{"id": "'" + delivery + "'"}, probes},
		{"search_attempts of a delivery", "search_attempts", pgx.NamedArgs{"id": "'" + delivery + "'"}, probes},
		{"search_attempts of an event", "search_attempts", pgx.NamedArgs{"id": event}, 11 * probes},
		{"delivery_row", "delivery_row", pgx.NamedArgs{"id": "'" + delivery + "'", "from": lit(now.Add(-30 * 24 * time.Hour)),
			"to": lit(now), "preview": "100"}, probes},
		{"endpoint_hours", "endpoint_hours", pgx.NamedArgs{"since": hour}, hourly},
		// The newest 50: a page or two each, whatever the hour holds.
		{"endpoint_attempts", "endpoint_attempts", pgx.NamedArgs{"since": hour, "limit": "50", "endpoint_given": "false",
			"endpoint_id": "NULL"}, 3 * 50},
		{"queue_status", "queue_status", pgx.NamedArgs{}, hourly},
	}
	t.Logf("%d partitions of each history; the day's attempts partition holds %d pages", parts, day)
	// The partitions that hold at least half a day's rows (the oldest and
	// the newest hold about half a day, either side of it). A scan of an
	// empty one costs nothing: a planner rightly reads a few hundred rows
	// whole rather than probe an index for each of ten keys (the buffer
	// bounds still hold it).
	full := map[string]bool{}
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid
		WHERE i.inhparent IN ('webhook_outbox_history'::regclass, 'webhook_attempts'::regclass) AND c.reltuples >= $1`, dayRows/2)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		full[n] = true
	}
	if len(full) < 2*(historyDays-1) {
		t.Fatalf("only %d partitions hold rows", len(full))
	}
	wholeScan := regexp.MustCompile(`Seq Scan on (webhook_outbox_history_\w+|webhook_attempts_\w+)`)
	for i, r := range reads {
		sql, lits := positional(t, outbox.NamedStatement(r.statement), r.args)
		if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE reads_chk%d AS %s", i, sql)); err != nil {
			t.Fatalf("%s: %v\n%s", r.name, err, sql)
		}
		execute := fmt.Sprintf("EXECUTE reads_chk%d", i)
		if lits != "" {
			execute += "(" + lits + ")"
		}
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
				t.Fatal(err)
			}
			plan := explain(t, conn, "EXPLAIN (ANALYZE, BUFFERS) "+execute)
			for _, m := range wholeScan.FindAllStringSubmatch(plan, -1) {
				if full[m[1]] {
					t.Errorf("%s, %s: %s, a partition read whole:\n%s", r.name, mode, m[0], plan)
				}
			}
			used := buffers(t, plan)
			t.Logf("%s, %s: %d buffers", r.name, mode, used)
			if used > r.most {
				t.Errorf("%s, %s: touched %d buffers, more than %d:\n%s", r.name, mode, used, r.most, plan)
			}
		}
	}
	if _, err := conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
}
