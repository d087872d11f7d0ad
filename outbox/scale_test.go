package outbox_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// backlogRows is the backlog of the endpoint that is down. The claim's
// cost is judged against bounds of tens of buffers over an empty table's
// (a skipped endpoint) and of hundreds (the queues' heads), and this
// backlog fills thousands of pages (its partition keeps room on each, and
// its queue index): a claim that read it, or a good part of it, would go
// far over both, as with the million rows. The million-row load is
// the history's (retention's TestMoveBackfillWhileClaiming).
const backlogRows = 100_000

// buffersOf runs the claim's steps under EXPLAIN (ANALYZE, BUFFERS) in a
// transaction it rolls back, and returns the shared buffers they touched
// (hit and read) and their plans.
func buffersOf(t *testing.T, db *testdb.DB, args pgx.NamedArgs, planMode string) (int, string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+planMode); err != nil {
		t.Fatal(err)
	}
	total := 0
	var plans []string
	for _, step := range outbox.ClaimStatements() {
		sql, lits := positional(t, step[1], args)
		if _, err := tx.Exec(ctx, "PREPARE scale_chk AS "+sql); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) EXECUTE scale_chk("+lits+")")
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "DEALLOCATE scale_chk"); err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		plans = append(plans, step[0]+":\n"+plan)
		// The first Buffers line is the root node's: the whole statement
		// (none when it touched no buffer).
		n, _ := touched(plan)
		total += n
	}
	return total, strings.Join(plans, "\n")
}

// The claim schedules by endpoint: with a backlog of due rows of an endpoint
// that is down ahead of it, a healthy endpoint's new delivery is taken by
// the very first claim (round robin between endpoints, not one global
// order), and once the down endpoint is skipped (at its limit, or parked)
// its rows are not read at all: the claim touches about as many buffers as
// on an empty table. Before, the claim walked every pending row in
// (created_at, id) order: the first claim took ten of the backlog's rows,
// and a claim that skipped them read the whole backlog.
func TestClaimCostsNothingForABacklogItCannotTake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	stuck := endpoint(t, db, "stuck", true)
	healthy := endpoint(t, db, "healthy", true)
	claimArgs := func(skip string) pgx.NamedArgs {
		return pgx.NamedArgs{"limit": "10", "lease_ms": "30000", "skip": "'{" + skip + "}'::uuid[]", "room": "'{}'::jsonb",
			"default_room": "25", "env_room": "0", "env": "false"}
	}
	// A first delivery of the healthy endpoint, on the empty table: the
	// figure to compare with.
	empty, _ := buffersOf(t, db, claimArgs(stuck), "force_custom_plan")

	// The backlog, written as a bulk load would be (no NOTIFY for each
	// row), all older than the healthy endpoint's next delivery.
	db.Load(t, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
		SELECT 'order.paid', '{}', $1, now() - interval '1 hour' + g * interval '1 millisecond'
		FROM generate_series(1, $2::int) g`, stuck, backlogRows)
	if _, err := db.Pool.Exec(ctx, "ANALYZE webhook_outbox"); err != nil {
		t.Fatal(err)
	}
	// The healthy endpoint's one delivery, written again before each
	// measurement. The measurements before leave its aborted lease updates
	// on its page: whether its next lease fits there (HOT) or moves to a
	// new page and every index (about 50 more buffers, none of them the
	// backlog's) depended on whether the page had been pruned meanwhile,
	// which a busy server decides (a VACUUM skips a page another backend
	// has pinned; it failed CI so, 90 buffers against a bound of 67). A
	// row just inserted sits on a page left with the room the pending
	// partition's fillfactor keeps (migration 017), where its lease fits.
	healthyRow := func() {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `DELETE FROM webhook_outbox WHERE NOT processed AND endpoint_id = $1`, healthy); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES ('order.paid', '{"n":1}', $1)`, healthy); err != nil {
			t.Fatal(err)
		}
	}

	// Custom and generic plans alike (the worker's driver prepares the
	// statement; after five runs the server may keep a generic plan).
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		healthyRow()
		parked, plan := buffersOf(t, db, claimArgs(stuck), mode)
		if limit := empty + 50; parked > limit {
			t.Errorf("%s: a claim skipping the backlog's endpoint touched %d buffers (empty table: %d, bound %d):\n%s", mode, parked, empty, limit, plan)
		}
		head, plan := buffersOf(t, db, claimArgs(""), mode)
		if head > 500 {
			t.Errorf("%s: a claim taking from both queues touched %d buffers, want the heads only (< 500):\n%s", mode, head, plan)
		}
		t.Logf("%s: buffers per claim: empty table %d, backlog of %d skipped %d, both queues %d", mode, empty, backlogRows, parked, head)
	}

	// Fairness: the first claim takes the healthy endpoint's delivery,
	// beside its share of the backlog's oldest rows (half the limit, two
	// queues), and says more is left.
	b, err := s.Claim(ctx, webhook.Query{Limit: 10, Lease: 30 * time.Second, DefaultRoom: 25})
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, r := range b.Rows {
		per[r.EndpointName]++
	}
	if per["healthy"] != 1 || per["stuck"] != 5 || !b.More {
		t.Fatalf("first claim took %v (more %v), want the healthy delivery and 5 of the backlog", per, b.More)
	}
}

// With more endpoints ready than one claim can serve, a claim takes one
// row of each of the Limit endpoints whose heads are oldest and says more
// is left (it may say so when none is: the next claim is then empty): every endpoint's first row goes out before any endpoint's
// second, and a claim locks no more rows than it takes.
func TestClaimRoundRobinOverManyEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	const endpoints, perEndpoint, limit = 30, 3, 10
	var ids []string
	for i := range endpoints {
		ids = append(ids, endpoint(t, db, "e"+strconv.Itoa(i), true))
	}
	for round := range perEndpoint {
		for i, id := range ids {
			if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
				VALUES ('x', '{}', $1, now() - interval '1 minute' + ($2 * 100 + $3) * interval '1 millisecond')`, id, round, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[string]int{}
	for claim := range endpoints * perEndpoint / limit {
		b, err := s.Claim(ctx, webhook.Query{Limit: limit, Lease: time.Minute, DefaultRoom: 25})
		if err != nil {
			t.Fatal(err)
		}
		// More may be true on the last one too: a queue that gave its whole
		// share may have had no row left.
		if len(b.Rows) != limit || !b.More && claim < endpoints*perEndpoint/limit-1 {
			t.Fatalf("claim %d: %d rows, more %v", claim, len(b.Rows), b.More)
		}
		round := claim * limit / endpoints
		for _, r := range b.Rows {
			if seen[r.EndpointName] != round {
				t.Fatalf("claim %d: a row of %s, which had %d already, before every endpoint had %d", claim, r.EndpointName, seen[r.EndpointName], round)
			}
			seen[r.EndpointName]++
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE lease_token IS NOT NULL"); n != (claim+1)*limit {
			t.Fatalf("after claim %d: %d rows leased, want %d", claim, n, (claim+1)*limit)
		}
	}
	if b, err := s.Claim(ctx, webhook.Query{Limit: limit, Lease: time.Minute, DefaultRoom: 25}); err != nil || len(b.Rows) != 0 || b.More {
		t.Fatalf("last claim: %+v, %v", b, err)
	}
}

// The loose index scan over the queues keeps to webhook_outbox_queue_idx
// whatever the statistics say of endpoint_id: taken while the table held
// only events (every endpoint_id NULL; an emptied table keeps them), they gave the
// step's "endpoint_id IS NOT NULL" no rows, so its LIMIT 1 saved the index
// scan nothing and the planner read the whole partition once per queue
// instead (custom and generic plans alike).
func TestClaimListsQueuesOnTheIndexWithStaleStatistics(t *testing.T) {
	t.Parallel()
	const queues = 200
	for _, tc := range []struct {
		name    string
		emptied bool // TRUNCATE then ANALYZE: the statistics of the events stay
	}{
		{"analyzed with events only", false},
		{"analyzed with events, then emptied", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret)
				SELECT 'q' || g, 'https://h.example.com/' || g, 'whsec_x' FROM generate_series(1, $1::int) g`, queues); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, created_at)
				SELECT 'e', '{}', now() + interval '1 hour' FROM generate_series(1, 2000)`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Pool.Exec(ctx, "ANALYZE webhook_outbox"); err != nil {
				t.Fatal(err)
			}
			if tc.emptied {
				if _, err := db.Pool.Exec(ctx, "TRUNCATE webhook_outbox; ANALYZE webhook_outbox"); err != nil {
					t.Fatal(err)
				}
			}
			// Ten rows a queue, then no ANALYZE: autovacuum's comes later.
			if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id)
				SELECT 'e', '{}', e.id FROM webhook_endpoints e, generate_series(1, 10)`); err != nil {
				t.Fatal(err)
			}
			args := pgx.NamedArgs{"limit": "10", "lease_ms": "30000", "skip": "'{}'::uuid[]", "room": "'{}'::jsonb",
				"default_room": "25", "env_room": "0", "env": "false"}
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				buffers, plan := buffersOf(t, db, args, mode)
				if strings.Contains(plan, "Seq Scan on webhook_outbox") || buffers > 20*queues {
					t.Errorf("%s: a claim over %d queues touched %d buffers (bound %d):\n%s", mode, queues, buffers, 20*queues, plan)
				}
			}
		})
	}
}

// A thousand endpoints with one row each (scale-many): a claim of 100
// takes one row of each of the 100 endpoints whose rows are oldest, and
// ten claims take them all, each listing the queues once.
func TestClaimManyEndpointsOneRowEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	const endpoints, limit = 1000, 100
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret)
		SELECT 'm' || g, 'https://h.example.com/' || g, 'whsec_x' FROM generate_series(1, $1::int) g`, endpoints); err != nil {
		t.Fatal(err)
	}
	// Row n is the n-th oldest; the endpoints' ids are in no such order.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
		SELECT 'x', jsonb_build_object('n', n), id, now() - interval '1 hour' + n * interval '1 millisecond'
		FROM (SELECT id, row_number() OVER (ORDER BY name) AS n FROM webhook_endpoints) e`); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for claim := range endpoints / limit {
		b, err := s.Claim(ctx, webhook.Query{Limit: limit, Lease: time.Minute, DefaultRoom: 25})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) != limit || !b.More && claim < endpoints/limit-1 {
			t.Fatalf("claim %d: %d rows, more %v", claim, len(b.Rows), b.More)
		}
		for _, r := range b.Rows {
			if seen[r.EndpointName] {
				t.Fatalf("claim %d: a second row of %s", claim, r.EndpointName)
			}
			seen[r.EndpointName] = true
		}
		// The oldest first: every row of this claim is older than any left.
		if n := db.Count(t, `SELECT count(*) FROM webhook_outbox l, webhook_outbox p
			WHERE l.lease_token IS NOT NULL AND p.lease_token IS NULL AND NOT l.processed AND NOT p.processed
			AND l.created_at > p.created_at`); n != 0 {
			t.Fatalf("claim %d: %d pairs of a leased row younger than a pending one", claim, n)
		}
	}
	if b, err := s.Claim(ctx, webhook.Query{Limit: limit, Lease: time.Minute, DefaultRoom: 25}); err != nil || len(b.Rows) != 0 {
		t.Fatalf("last claim: %d rows, %v", len(b.Rows), err)
	}
}

// A queue with less room than the even share (an endpoint held to a few
// rows by its adaptive limit or its flow control) takes its room, and the
// others share what it leaves: it does not halve what a claim takes from
// them, which would double the claims a backlog beside it costs.
func TestClaimSharesWhatASmallRoomLeaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	small, big := endpoint(t, db, "small", true), endpoint(t, db, "big", true)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
		SELECT 'x', '{}', e.id, now() - interval '1 minute' + g * interval '1 millisecond'
		FROM unnest(ARRAY[$1, $2]::uuid[]) AS e(id), generate_series(1, 20) AS g`, small, big); err != nil {
		t.Fatal(err)
	}
	const limit = 10
	b, err := s.Claim(ctx, webhook.Query{Limit: limit, Lease: time.Minute, DefaultRoom: 25, Room: map[string]int{small: 1}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range b.Rows {
		got[r.EndpointName]++
	}
	if got["small"] != 1 || got["big"] != limit-1 {
		t.Fatalf("claimed %v, want small 1 (its room) and big %d (the rest of the limit)", got, limit-1)
	}
}
