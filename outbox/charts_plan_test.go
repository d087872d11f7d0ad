package outbox_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// historyRows is the attempts' history the chart is planned over: two
// weeks of it in day partitions.
const historyRows = 200_000

// chartHistory makes day partitions of the attempts for the last 14 days,
// now in the middle of one (dayPartitionsAroundNow), and fills them with
// historyRows attempts of ten endpoints, in the order of their times (as
// the workers write them), then analyzes them.
func chartHistory(t *testing.T, db *testdb.DB) (endpointID string) {
	t.Helper()
	dayPartitionsAroundNow(t, db, "webhook_attempts", 15)
	exec(t, db, `INSERT INTO webhook_endpoints (name, url, secret) SELECT 'e' || g, 'https://h.example.com/' || g, 'whsec_x' FROM generate_series(1, 10) g`)
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
		SELECT gen_random_uuid(), e.ids[1 + g % 10], 1 + g % 3, now() - interval '14 days' + g * (interval '14 days' / $1::int), 5 + g % 400,
		  CASE WHEN g % 9 = 0 THEN 503 ELSE 200 END, CASE WHEN g % 9 = 0 THEN 'retryable' END, CASE WHEN g % 9 = 0 THEN 'http 503' END
		FROM generate_series(1, $1::int - 1) g, (SELECT array_agg(id ORDER BY name) AS ids FROM webhook_endpoints) e`, historyRows)
	exec(t, db, `ANALYZE webhook_attempts`)
	if err := db.Pool.QueryRow(context.Background(), `SELECT id::text FROM webhook_endpoints WHERE name = 'e3'`).Scan(&endpointID); err != nil {
		t.Fatal(err)
	}
	return endpointID
}

// The chart reads the attempts through their time index
// (webhook_attempts_started_at_idx, migration 023), never a partition
// whole, and only the partitions of its range, for an hour, a day and a
// week, of every endpoint and of one, with custom and generic plans alike
// (the console's driver prepares it): over two weeks of history, just
// analyzed (its pages not yet all visible: the index's entries lead to the
// table). The hour's chart touches a small part of the history's pages.
func TestChartPlanUsesTheTimeIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	ep := chartHistory(t, db)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var now time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	uses := regexp.MustCompile(`(Index Only Scan|Index Scan|Bitmap Index Scan) using webhook_attempts_p\w*started_at\w*`)
	part := regexp.MustCompile(`on (webhook_attempts_(?:p\d{8}t\d{4}|default))`)
	for _, rg := range []struct {
		name   string
		bucket time.Duration
		count  int
	}{{"hour", time.Minute, 60}, {"day", 15 * time.Minute, 96}, {"week", 2 * time.Hour, 84}} {
		from := now.UTC().Truncate(rg.bucket).Add(-time.Duration(rg.count-1) * rg.bucket)
		until := from.Add(time.Duration(rg.count) * rg.bucket)
		// The partitions the range may read: those its time overlaps.
		rows, err := conn.Query(ctx, `SELECT b.part::text FROM webhook_partition_bounds('webhook_attempts') b
			WHERE b.lo < $2 AND b.hi > $1`, from, until)
		if err != nil {
			t.Fatal(err)
		}
		allowed, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, scope := range []struct{ name, given, id string }{{"every endpoint", "false", "NULL"}, {"one endpoint", "true", "'" + ep + "'"}} {
			sql, lits := positional(t, outbox.ChartStatement(), pgx.NamedArgs{
				"since": "'" + from.Format(time.RFC3339Nano) + "'", "until": "'" + until.Format(time.RFC3339Nano) + "'",
				"bucket_s": strconv.Itoa(int(rg.bucket / time.Second)), "endpoint_given": scope.given, "endpoint_id": scope.id})
			if _, err := conn.Exec(ctx, "PREPARE chart_chk AS "+sql); err != nil {
				t.Fatalf("%v\n%s", err, sql)
			}
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
					t.Fatal(err)
				}
				plan := explain(t, conn, "EXPLAIN EXECUTE chart_chk("+lits+")")
				where := fmt.Sprintf("%s, %s, %s", rg.name, scope.name, mode)
				if !uses.MatchString(plan) || strings.Contains(plan, "Seq Scan on webhook_attempts") {
					t.Errorf("%s: the attempts are not read through their time index:\n%s", where, plan)
				}
				for _, m := range part.FindAllStringSubmatch(plan, -1) {
					if !slices.Contains(allowed, m[1]) {
						t.Errorf("%s: reads the partition %s, outside its range (%v):\n%s", where, m[1], allowed, plan)
					}
				}
			}
			if _, err := conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE chart_chk"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What the hour's chart of every endpoint touches, against the
	// history's pages (tables and the time index).
	hour := now.UTC().Truncate(time.Minute).Add(-59 * time.Minute)
	sql, lits := positional(t, outbox.ChartStatement(), pgx.NamedArgs{
		"since": "'" + hour.Format(time.RFC3339Nano) + "'", "until": "'" + hour.Add(time.Hour).Format(time.RFC3339Nano) + "'",
		"bucket_s": "60", "endpoint_given": "false", "endpoint_id": "NULL"})
	if _, err := conn.Exec(ctx, "PREPARE chart_buf AS "+sql); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, conn, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE chart_buf("+lits+")")
	used := buffers(t, plan)
	pages := db.Count(t, `SELECT sum(relpages)::int FROM pg_class WHERE relname LIKE 'webhook_attempts_p%'`)
	t.Logf("the hour's chart touched %d buffers; the history holds %d pages", used, pages)
	if used > pages/10 {
		t.Errorf("the hour's chart touched %d buffers, more than a tenth of the history's %d pages:\n%s", used, pages, plan)
	}
}
