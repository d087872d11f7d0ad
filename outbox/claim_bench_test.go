package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/dbconn"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// BenchmarkClaimRecord claims a batch of 10 rows and records them all
// delivered: two statements per batch whatever its size. Each op is one
// batch; allocs/op divided by 10 is the store's allocations per delivery.
//
//	go test ./outbox -run '^$' -bench ClaimRecord -benchmem
func BenchmarkClaimRecord(b *testing.B) {
	const batch = 10
	db := testdb.New(b)
	c := newClaimant(b, db, batch, 30*time.Second, true)
	b.ReportAllocs()
	claimRecordLoop(b, db, c, webhook.Query{Limit: batch})
}

// claimRecordLoop is the loop of the claim benchmarks: each op inserts
// q.Limit events (not timed), claims them all with q and records them
// delivered.
func claimRecordLoop(b *testing.B, db *testdb.DB, c claimant, q webhook.Query) {
	ctx := context.Background()
	outcomes := make([]webhook.Outcome, q.Limit)
	for b.Loop() {
		b.StopTimer()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload)
			SELECT 'bench', '{"seq":1,"t":1}' FROM generate_series(1, $1)`, q.Limit); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		got, err := c.Claim(ctx, c.query(q))
		if err != nil || len(got.Rows) != q.Limit {
			b.Fatalf("claim: %v (%d rows)", err, len(got.Rows))
		}
		for i, r := range got.Rows {
			outcomes[i] = webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done}
		}
		if _, err := c.Record(ctx, outcomes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimRecordBeside is BenchmarkClaimRecord's WEBHOOK_URL
// deployment, on the worker's own sessions (dbconn's direct path), alone,
// with a backlog of events, and beside endpoints of the table that have
// nothing for it: an idle one (subscribed to another type), one holding
// rows due later (a dead endpoint backing off), and one holding due rows
// the claim skips (its breaker open). Each should cost what the
// deployment costs alone: the claim stays on its plain path.
//
//	go test ./outbox -run '^$' -bench ClaimRecordBeside -count 5
func BenchmarkClaimRecordBeside(b *testing.B) {
	const (
		batch = 10
		held  = 100_000
	)
	stuck := func(due string) func(*testing.B, *testdb.DB) []string {
		return func(b *testing.B, db *testdb.DB) []string {
			var id string
			if err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret, event_types)
				VALUES ('dead', 'https://h.example.com/', 'whsec_x', '{other.type}') RETURNING id::text`).Scan(&id); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
				SELECT 'other.type', '{}', $1, now() + `+due+` FROM generate_series(1, $2)`, id, held); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Pool.Exec(context.Background(), `ANALYZE webhook_outbox`); err != nil {
				b.Fatal(err)
			}
			return []string{id}
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(*testing.B, *testdb.DB) []string // returns the endpoints to skip
	}{
		{"alone", func(*testing.B, *testdb.DB) []string { return nil }},
		{"idle", func(b *testing.B, db *testdb.DB) []string {
			if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret, event_types)
				VALUES ('idle', 'https://h.example.com/', 'whsec_x', '{other.type}')`); err != nil {
				b.Fatal(err)
			}
			return nil
		}},
		{"backlog", func(b *testing.B, db *testdb.DB) []string {
			if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload)
				SELECT 'bench', '{"seq":1,"t":1}' FROM generate_series(1, $1)`, held); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Pool.Exec(context.Background(), `ANALYZE webhook_outbox`); err != nil {
				b.Fatal(err)
			}
			return nil
		}},
		{"scheduled", func(b *testing.B, db *testdb.DB) []string { stuck("interval '1 hour'")(b, db); return nil }},
		{"skipped", stuck("interval '-1 hour'")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := testdb.New(b)
			skip := tc.setup(b, db)
			// The worker's own sessions: generic plans, JIT off.
			pool, err := dbconn.OpenPath(context.Background(), dbconn.Config{DatabaseURL: db.URL, Size: 4}, dbconn.Direct)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			s, err := outbox.New(pool)
			if err != nil {
				b.Fatal(err)
			}
			c := claimant{Store: s, batch: batch, lease: 30 * time.Second, env: true}
			claimRecordLoop(b, db, c, webhook.Query{Limit: batch, Skip: skip})
		})
	}
}
