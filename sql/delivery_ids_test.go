package schema_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// idTime is the time a version 7 UUID carries: its first 48 bits, Unix
// milliseconds.
func idTime(t *testing.T, id string) time.Time {
	t.Helper()
	ms, err := strconv.ParseInt(strings.ReplaceAll(id, "-", "")[:12], 16, 64)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return time.UnixMilli(ms)
}

// A row written without a delivery id gets a version 7 UUID (RFC 9562) of
// the time it was written: ids of rows written later sort after, none
// repeats, and an id the producer gives is kept.
func TestDeliveryIDsAreVersion7InTimeOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	type batch struct {
		ids         []string
		before, end time.Time
	}
	write := func() batch {
		t.Helper()
		var b batch
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&b.before); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `INSERT INTO webhook_outbox (event_type, payload)
				SELECT 'ids', '{}' FROM generate_series(1, 1000) RETURNING delivery_id::text`)
			if err != nil {
				return err
			}
			if b.ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&b.end)
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first, second := write(), write()
	seen := map[string]bool{}
	for _, b := range []batch{first, second} {
		for _, id := range b.ids {
			if id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
				t.Fatalf("%s: not a version 7 UUID of RFC 9562's variant", id)
			}
			if at := idTime(t, id); at.Before(b.before.Truncate(time.Millisecond)) || at.After(b.end) {
				t.Fatalf("%s carries %s, not within its insert's [%s, %s]", id, at, b.before, b.end)
			}
			if seen[id] {
				t.Fatalf("%s given twice", id)
			}
			seen[id] = true
		}
	}
	latest := first.ids[0]
	for _, id := range first.ids {
		latest = max(latest, id)
	}
	for _, id := range second.ids {
		if id < latest && !idTime(t, id).Equal(idTime(t, latest)) {
			t.Fatalf("%s, written later, sorts before %s", id, latest)
		}
	}

	const given = "6f1c2b1e-0000-4000-8000-00000000abcd"
	var kept string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_outbox (delivery_id, event_type, payload) VALUES ($1, 'ids', '{}')
		RETURNING delivery_id::text`, given).Scan(&kept); err != nil || kept != given {
		t.Fatalf("a given id: %q, %v; want it kept", kept, err)
	}
}
