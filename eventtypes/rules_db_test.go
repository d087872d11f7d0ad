package eventtypes_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fluxora/webhook-worker/eventtypes"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// strictCases are a catalog (its types, strict or not) and an event type.
var strictCases = []struct {
	listed []string
	strict bool
	typ    string
}{
	{nil, false, "invoice.paid"},
	{nil, true, "invoice.paid"},
	{nil, true, "fluxora.endpoint.disabled"},
	{[]string{"invoice.paid"}, false, "invoice.payed"},
	{[]string{"invoice.paid"}, true, "invoice.paid"},
	{[]string{"invoice.paid"}, true, "invoice.payed"},
	{[]string{"invoice.paid"}, true, "Invoice.paid"},
	{[]string{"invoice.paid"}, true, "invoice.paid "},
	{[]string{"invoice.paid"}, true, "invoice.*"},
	{[]string{"invoice.paid"}, true, "fluxora.endpoint.disabled"},
	{[]string{"invoice.paid"}, true, "fluxora."},
	{[]string{"invoice.paid"}, true, "fluxora"},
	{[]string{"a b", "é.ü"}, true, "é.ü"},
	{[]string{"a b", "é.ü"}, true, "e.u"},
	{[]string{"a b", "é.ü"}, true, "100% 'quoted' \"type\" \\ %s"},
}

// setCatalog makes the database's catalog listed and strict.
func setCatalog(t *testing.T, db *testdb.DB, listed []string, strict bool) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "DELETE FROM webhook_event_types"); err != nil {
		t.Fatal(err)
	}
	for _, n := range listed {
		if _, err := db.Pool.Exec(ctx, "INSERT INTO webhook_event_types (name) VALUES ($1)", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, "UPDATE webhook_event_catalog SET strict = $1", strict); err != nil {
		t.Fatal(err)
	}
}

// The database's strict rule (webhook_event_type_problem, which the
// content trigger applies) and the worker's (Catalog.Problem, read through
// the store as the worker reads it) refuse the same types with the same
// text: an event the database let in is never refused by the worker for
// its type, and the worker's refusal reads as the producer's would have.
func TestStrictRuleMatchesTheDatabases(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	store, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refused := 0
	for _, tc := range strictCases {
		setCatalog(t, db, tc.listed, tc.strict)
		var problem *string
		if err := db.Pool.QueryRow(ctx, "SELECT webhook_event_type_problem($1)", tc.typ).Scan(&problem); err != nil {
			t.Fatal(err)
		}
		c := load(t, store)
		if got := c.Problem(tc.typ); got != deref(problem) {
			t.Errorf("%v strict=%v %q: the worker says %q, the database %q", tc.listed, tc.strict, tc.typ, got, deref(problem))
		}
		if problem != nil {
			refused++
		}
	}
	if refused == 0 || refused == len(strictCases) {
		t.Fatalf("%d of %d cases refused: the table tests one side only", refused, len(strictCases))
	}
}

// load reads the catalog as the worker does.
func load(t *testing.T, store *outbox.Store) *eventtypes.Catalog {
	t.Helper()
	ctx := context.Background()
	st, err := store.EventCatalogState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	types, err := store.EventTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return eventtypes.New(types, st.Strict, st.Version)
}

// A producer's event that the strict rule refuses fails in its own
// statement (a plain INSERT, webhook_enqueue, an UPDATE of its type), with
// SQLSTATE 23514, the constraint webhook_outbox_event_type_known and the
// rule's text; nothing is stored. The rows the worker writes from an event
// already accepted (a delivery of a fan-out, a retry, a targeted row) are
// not checked here: the worker checks them before their first attempt.
func TestStrictRefusesProducersInserts(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	setCatalog(t, db, []string{"invoice.paid"}, true)
	for _, stmt := range []string{
		`INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, '{}')`,
		`SELECT webhook_enqueue($1, '{}')`,
	} {
		_, err := db.Pool.Exec(ctx, stmt, "invoice.payed")
		want := "webhook_outbox.event_type: unknown event type invoice.payed: the event catalog is strict"
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "webhook_outbox_event_type_known" || pgErr.Message != want {
			t.Errorf("%.40s: %v, want %q", stmt, err, want)
		}
		for _, ok := range []string{"invoice.paid", "fluxora.endpoint.disabled"} {
			if _, err := db.Pool.Exec(ctx, stmt, ok); err != nil {
				t.Errorf("%.40s %s: %v", stmt, ok, err)
			}
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type = 'invoice.payed'"); n != 0 {
		t.Fatalf("%d refused events stored", n)
	}
	_, err := db.Pool.Exec(ctx, "UPDATE webhook_outbox SET event_type = 'invoice.payed' WHERE event_type = 'invoice.paid'")
	if err == nil || !strings.Contains(err.Error(), "unknown event type invoice.payed") {
		t.Fatalf("an update to an unknown type: %v", err)
	}

	// A row of an endpoint (a fan-out's delivery, a targeted row), a retry
	// of the WEBHOOK_URL endpoint's delivery (fanout set): not checked.
	var ep string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('a', 'https://hooks.example.com/', 'whsec_x')
		RETURNING id::text`).Scan(&ep); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES ('gone.type', '{}', '` + ep + `')`,
		`INSERT INTO webhook_outbox (event_type, payload, attempt, fanout) VALUES ('gone.type', '{}', 2, 1)`,
	} {
		if _, err := db.Pool.Exec(ctx, stmt); err != nil {
			t.Errorf("%.60s: %v", stmt, err)
		}
	}

	// Off again: any type.
	setCatalog(t, db, []string{"invoice.paid"}, false)
	db.Insert(t, "invoice.payed", `{}`)
}

// Every change of the types bumps the version, once a statement; strict
// mode does not.
func TestVersionFollowsTheTypes(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	store, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	version := func() int64 {
		t.Helper()
		st, err := store.EventCatalogState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Version
	}
	v0 := version()
	if _, err := store.AddEventType(ctx, webhook.EventType{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	v1 := version()
	if _, err := store.UpdateEventType(ctx, webhook.EventType{Name: "a", Description: "d"}); err != nil {
		t.Fatal(err)
	}
	v2 := version()
	if _, err := db.Pool.Exec(ctx, "INSERT INTO webhook_event_types (name) VALUES ('b'), ('c')"); err != nil {
		t.Fatal(err)
	}
	v3 := version()
	if _, err := store.SetEventCatalogStrict(ctx, true); err != nil {
		t.Fatal(err)
	}
	v4 := version()
	if _, err := store.RemoveEventType(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	v5 := version()
	if !(v0 < v1 && v1 < v2 && v3 == v2+1 && v4 == v3 && v5 > v4) {
		t.Fatalf("versions %d %d %d %d %d %d", v0, v1, v2, v3, v4, v5)
	}
	if _, err := store.RemoveEventType(ctx, "a"); !errors.Is(err, outbox.ErrEventTypeNotFound) {
		t.Fatalf("removing a missing type: %v", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// An insert that took its snapshot before strict mode was turned off (or
// before the catalog existed: a producer waiting for the partition's lock
// while the migration ran) is judged by the catalog as it is when the
// trigger refuses: it is let in, never refused with a rule no longer in
// force. A catalog without its row is strict off.
func TestStrictJudgedByTheCatalogAtRefusal(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	setCatalog(t, db, []string{"invoice.paid"}, true)
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK webhook_outbox_pending IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM webhook_event_catalog"); err != nil {
		t.Fatal(err)
	}
	inserted := make(chan error, 1)
	go func() {
		_, err := db.Pool.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload) VALUES ('invoice.payed', '{}')")
		inserted <- err
	}()
	waitfor.True(t, 10*time.Second, "the insert waits for the partition", func() bool {
		return db.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO webhook_outbox%'`) == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-inserted; err != nil {
		t.Fatalf("the insert: %v, want it let in", err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type = 'invoice.payed'"); n != 1 {
		t.Fatalf("%d rows", n)
	}
}
