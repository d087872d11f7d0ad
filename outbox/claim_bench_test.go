package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
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
	ctx := context.Background()
	outcomes := make([]webhook.Outcome, batch)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload)
			SELECT 'bench', '{"seq":1,"t":1}' FROM generate_series(1, $1)`, batch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		got, err := c.Claim(ctx, c.query(webhook.Query{Limit: batch}))
		rows := got.Rows
		if err != nil || len(rows) != batch {
			b.Fatalf("claim: %v (%d rows)", err, len(rows))
		}
		for i, r := range rows {
			outcomes[i] = webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done}
		}
		if _, err := c.Record(ctx, outcomes); err != nil {
			b.Fatal(err)
		}
	}
}
