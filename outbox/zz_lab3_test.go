package outbox

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

func TestLabIdle(t *testing.T) {
	if os.Getenv("LAB") == "" {
		t.Skip()
	}
	ctx := context.Background()
	type side struct {
		db *testdb.DB
		s  *Store
		d  time.Duration
	}
	mk := func(idle bool) *side {
		db := testdb.New(t)
		db.Pool.Exec(ctx, "ALTER DATABASE \""+db.Name+"\" SET plan_cache_mode = force_generic_plan")
		db.Pool.Reset()
		s, _ := New(db.Pool)
		if idle {
			db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret, event_types) VALUES ('idle', 'http://127.0.0.1:9/idle', 'whsec_aWRsZS1lbmRwb2ludC1zZWNyZXQ=', ARRAY['bench.idle-never'])`)
		}
		return &side{db: db, s: s}
	}
	sides := []*side{mk(false), mk(true)}
	for round := 0; round < 3; round++ {
		for _, sd := range sides {
			sd.db.Pool.Exec(ctx, "TRUNCATE webhook_outbox")
			sd.db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload) SELECT 'bench.event', jsonb_build_object('seq', g) FROM generate_series(1, 20000) g`)
			sd.db.Pool.Exec(ctx, "ANALYZE webhook_outbox")
			sd.d = 0
		}
		for i := 0; i < 200; i++ {
			for _, sd := range sides {
				start := time.Now()
				b, err := sd.s.Claim(ctx, webhook.Query{Limit: 100, Lease: time.Minute, Env: true})
				if err != nil {
					t.Fatal(err)
				}
				sd.d += time.Since(start)
				// Record them done, as the worker would.
				var outs []webhook.Outcome
				for _, r := range b.Rows {
					outs = append(outs, webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done, Health: webhook.Healthy, Started: time.Now()})
				}
				if _, err := sd.s.Record(ctx, outs); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Logf("plain %v idle %v ratio %.2f", sides[0].d, sides[1].d, float64(sides[1].d)/float64(sides[0].d))
	}
}
