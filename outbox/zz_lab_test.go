package outbox

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

func TestLabDrain(t *testing.T) {
	if os.Getenv("LAB") == "" {
		t.Skip()
	}
	ctx := context.Background()
	oldSQL, _ := os.ReadFile("/tmp/plain.sql")
	type side struct {
		db *testdb.DB
		s  *Store
		d  time.Duration
	}
	mk := func() *side {
		db := testdb.New(t)
		db.Pool.Exec(ctx, "ALTER DATABASE \""+db.Name+"\" SET plan_cache_mode = force_generic_plan")
		db.Pool.Reset()
		s, _ := New(db.Pool)
		return &side{db: db, s: s}
	}
	oldS, newS, newRaw := mk(), mk(), mk()
	q := webhook.Query{Limit: 100, Lease: time.Minute, Env: true}
	runOld := func() {
		rows, err := oldS.db.Pool.Query(ctx, string(oldSQL), 100, 100, 60000)
		if err != nil {
			t.Fatal(err)
		}
		var outs []webhook.Outcome
		for rows.Next() {
			v, _ := rows.Values()
			tok, _ := v[1].([16]byte)
			if v[18] == true {
				outs = append(outs, webhook.Outcome{ID: v[0].(int64), Token: tok, Kind: webhook.Done, Health: webhook.Healthy, Started: time.Now()})
			}
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if _, err := oldS.s.Record(ctx, outs); err != nil {
			t.Fatal(err)
		}
	}
	runNewRaw := func() {
		named := claimArgs(q)
		batch := &pgx.Batch{}
		for _, st := range claimSteps {
			args, _ := st.args(named)
			batch.Queue(st.sql, args...)
		}
		br := newRaw.db.Pool.SendBatch(ctx, batch)
		for range claimSteps {
			rows, err := br.Query()
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				rows.Values()
			}
		}
		br.Close()
	}
	for round := 0; round < 3; round++ {
		for _, sd := range []*side{oldS, newS} {
			sd.db.Pool.Exec(ctx, "TRUNCATE webhook_outbox")
			sd.db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload) SELECT 'bench.event', jsonb_build_object('seq', g) FROM generate_series(1, 20000) g`)
			sd.db.Pool.Exec(ctx, "ANALYZE webhook_outbox")
			sd.d = 0
		}
		for i := 0; i < 200; i++ {
			st := time.Now()
			runOld()
			oldS.d += time.Since(st)
			st = time.Now()
			b, err := newS.s.Claim(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var outs []webhook.Outcome
			for _, r := range b.Rows {
				outs = append(outs, webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done, Health: webhook.Healthy, Started: time.Now()})
			}
			if _, err := newS.s.Record(ctx, outs); err != nil {
				t.Fatal(err)
			}
			newS.d += time.Since(st)
		}
		t.Logf("old %v new %v (%.2f)", oldS.d, newS.d, float64(newS.d)/float64(oldS.d))
		_ = runNewRaw
	}
}
