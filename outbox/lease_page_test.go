package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// A claim's lease leaves each row's new version on the row's own page
// (migration 017): an endpoint queue's lease is then a HOT update, with no
// index entry, and the WEBHOOK_URL endpoint's (which sets fanout, named by
// its indexes) at least writes no other page. A claim leases a run of
// neighbouring rows, so a page must keep room for a second version of
// every row on it. With the fillfactor 70 of before, small rows left room
// for about two in five of their new versions, and rows of 1.3 KiB sat
// four to a page with room for two.
func TestLeaseKeepsRowsOnTheirPage(t *testing.T) {
	t.Parallel()
	const rows = 300
	for _, tc := range []struct {
		name     string
		pad      int // 32 hex characters each in the payload: 38 make a row of 1.3 KiB, 56 of nearly 2 KiB (the largest kept inline)
		endpoint bool
	}{
		{"queue, small rows", 0, true},
		{"queue, 1.3 KiB rows", 38, true},
		{"queue, 2 KiB rows", 56, true},
		{"WEBHOOK_URL, small rows", 0, false},
		{"WEBHOOK_URL, 1.3 KiB rows", 38, false},
		{"WEBHOOK_URL, 2 KiB rows", 56, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			store, err := outbox.New(db.Pool)
			if err != nil {
				t.Fatal(err)
			}
			var endpoint *string
			if tc.endpoint {
				var id string
				if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret)
					VALUES ('a', 'http://127.0.0.1:9/a', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw') RETURNING id::text`).Scan(&id); err != nil {
					t.Fatal(err)
				}
				endpoint = &id
			}
			// One statement, as a bulk producer writes them: the rows fill
			// their pages one after the other.
			if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id)
				SELECT 'e', jsonb_build_object('n', g, 'pad',
				         (SELECT coalesce(string_agg(md5(g || '/' || k), ''), '') FROM generate_series(1, $2::int) k)),
				       $3::uuid
				FROM generate_series(1, $1::int) g`, rows, tc.pad, endpoint); err != nil {
				t.Fatal(err)
			}
			pages := func() map[int64]int64 {
				t.Helper()
				r, err := db.Pool.Query(ctx, `SELECT id, (ctid::text::point)[0]::bigint FROM webhook_outbox_pending`)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				out := map[int64]int64{}
				for r.Next() {
					var id, page int64
					if err := r.Scan(&id, &page); err != nil {
						t.Fatal(err)
					}
					out[id] = page
				}
				if err := r.Err(); err != nil {
					t.Fatal(err)
				}
				return out
			}
			before := pages()
			var used int64
			if err := db.Pool.QueryRow(ctx, `SELECT count(DISTINCT (ctid::text::point)[0]) FROM webhook_outbox_pending`).Scan(&used); err != nil {
				t.Fatal(err)
			}
			b, err := store.Claim(ctx, webhook.Query{Limit: rows, Lease: time.Minute, Env: !tc.endpoint})
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Rows) != rows {
				t.Fatalf("claim leased %d rows, want all %d", len(b.Rows), rows)
			}
			after := pages()
			moved := 0
			for id, page := range before {
				if after[id] != page {
					moved++
				}
			}
			if moved > 0 {
				t.Errorf("%d of %d leased rows (on %d pages) moved to another page", moved, rows, used)
			}
		})
	}
}
