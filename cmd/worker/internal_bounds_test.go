package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	schema "github.com/fluxora/webhook-worker/sql"
)

// leaseBound is migration 021's webhook_outbox_lease_bound: the latest a
// pending row's lease may end, from now.
const leaseBound = time.Hour

// The longest lease a worker can take (WEBHOOK_TIMEOUT_MS and
// WEBHOOK_GATE_TIMEOUT_MS at the most config.go allows) is within the
// schema's bound, which the migration states.
func TestLongestLeaseIsWithinTheSchemasBound(t *testing.T) {
	t.Parallel()
	longest := leaseFor(config{Timeout: 15 * time.Minute, GateTimeout: 10 * time.Second, RedisURL: "redis://127.0.0.1:6379"})
	if longest >= leaseBound {
		t.Fatalf("the longest lease %v is past the schema's bound %v", longest, leaseBound)
	}
	files, err := schema.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Version == "migrations/021_internal_bounds.sql" && !strings.Contains(f.SQL, "locked_until <= now() + interval '1 hour'") {
			t.Fatal("migration 021 does not bound the lease by 1 hour")
		}
	}
}

// Every write of an impossible internal state to a pending row is refused
// by its constraint, with a message naming the column; the states the
// worker itself writes are accepted.
func TestSchemaRefusesImpossibleInternalState(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var ep string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('e1', 'https://127.0.0.1/', 's') RETURNING id::text`).Scan(&ep); err != nil {
		t.Fatal(err)
	}
	id := db.Insert(t, "e", `{}`)[0]
	ins := `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, locked_until, lease_token, fanout, held, fan_to, fan_done) VALUES ('e', '{}', `
	for _, tc := range []struct {
		sql, constraint, col string
	}{
		{ins + `NULL, now() + interval '61 minutes', gen_random_uuid(), NULL, false, NULL, NULL)`, "webhook_outbox_lease_bound", "webhook_outbox.locked_until"},
		{`UPDATE webhook_outbox SET locked_until = '9999-12-31' WHERE id = $1`, "webhook_outbox_lease_bound", "webhook_outbox.locked_until"},
		{ins + `NULL, NULL, NULL, -1, false, NULL, NULL)`, "webhook_outbox_fanout_count", "webhook_outbox.fanout"},
		{`UPDATE webhook_outbox SET fanout = -1 WHERE id = $1`, "webhook_outbox_fanout_count", "webhook_outbox.fanout"},
		{ins + `'` + ep + `', NULL, NULL, NULL, true, NULL, NULL)`, "webhook_outbox_held_keyed", "webhook_outbox.held"},
		{`UPDATE webhook_outbox SET held = true WHERE id = $1`, "webhook_outbox_held_keyed", "webhook_outbox.held"},
		{ins + `'` + ep + `', now(), gen_random_uuid(), NULL, false, ARRAY['` + ep + `'::uuid], NULL)`, "webhook_outbox_fan_state", "webhook_outbox.fan_to"},
		{ins + `NULL, NULL, NULL, NULL, false, NULL, ARRAY['` + ep + `'::uuid])`, "webhook_outbox_fan_state", "webhook_outbox.fan_to"},
		{ins + `NULL, NULL, NULL, NULL, false, ARRAY['` + ep + `'::uuid], NULL)`, "webhook_outbox_fan_state", "webhook_outbox.fan_to"},
		{ins + `NULL, now() + interval '1 minute', NULL, NULL, false, ARRAY['` + ep + `'::uuid], NULL)`, "webhook_outbox_fan_state", "webhook_outbox.fan_to"},
		{`UPDATE webhook_outbox SET fan_to = ARRAY['` + ep + `'::uuid] WHERE id = $1`, "webhook_outbox_fan_state", "webhook_outbox.fan_to"},
	} {
		var err error
		if strings.Contains(tc.sql, "$1") {
			_, err = db.Pool.Exec(ctx, tc.sql, id)
		} else {
			_, err = db.Pool.Exec(ctx, tc.sql)
		}
		if err == nil || !strings.Contains(err.Error(), tc.col+": ") || !strings.Contains(err.Error(), "SQLSTATE 23514") {
			t.Errorf("%s\nwant refused naming %s, got %v", tc.sql, tc.col, err)
		}
		if strings.Contains(fmtErr(err), "Failing row") {
			t.Errorf("%s: the refusal prints the row: %v", tc.sql, err)
		}
	}
	// What the worker writes.
	for _, sql := range []string{
		ins + `NULL, now() + interval '59 minutes', gen_random_uuid(), NULL, false, NULL, NULL)`,
		ins + `NULL, NULL, NULL, 0, false, NULL, NULL)`,
		ins + `NULL, now() + interval '30 seconds', gen_random_uuid(), NULL, false, ARRAY['` + ep + `'::uuid], ARRAY['` + ep + `'::uuid])`,
		ins + `NULL, NULL, NULL, 2, false, ARRAY['` + ep + `'::uuid], NULL)`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM pg_constraint WHERE conname IN ('webhook_outbox_lease_bound', 'webhook_outbox_fanout_count',
		'webhook_outbox_held_keyed', 'webhook_outbox_fan_state') AND convalidated`); n != 4 {
		t.Fatalf("%d of the 4 constraints validated", n)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Rows written by SQL with an impossible internal state before migration
// 021 are repaired by it: a broken fan-out count dead-lettered with a
// reason naming the column, every other row delivered by a worker, none
// left pending.
func TestMigrationRepairsImpossibleInternalState(t *testing.T) {
	t.Parallel()
	db := testdb.NewEmpty(t)
	migrateBefore(t, db, "migrations/021_internal_bounds.sql")
	ctx := context.Background()
	c := newConsumer(t, nil)
	var ep string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('shop', $1, $2) RETURNING id::text`,
		c.srv.URL+"/shop", testSecret).Scan(&ep); err != nil {
		t.Fatal(err)
	}
	e := "'" + ep + "'::uuid"
	rows := []string{
		`('fine.event', NULL::uuid, NULL::timestamptz, NULL::uuid, NULL::int, false, NULL::uuid[], NULL::uuid[])`,
		`('far.event', NULL, '9999-12-31', gen_random_uuid(), NULL, false, NULL, NULL)`,
		`('far.delivery', ` + e + `, '9999-12-31', NULL, NULL, false, NULL, NULL)`,
		`('broken.env', NULL, NULL, NULL, -1, false, NULL, NULL)`,
		`('broken.delivery', ` + e + `, NULL, NULL, -5, false, NULL, NULL)`,
		`('held.nokey', ` + e + `, NULL, NULL, NULL, true, NULL, NULL)`,
		`('fanto.delivery', ` + e + `, NULL, NULL, NULL, false, ARRAY[` + e + `], NULL)`,
		`('fandone.only', NULL, NULL, NULL, NULL, false, NULL, ARRAY[` + e + `])`,
		`('fanto.nolease', NULL, NULL, NULL, NULL, false, ARRAY[` + e + `], NULL)`,
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, endpoint_id, locked_until, lease_token, fanout, held, fan_to, fan_done, payload)
		SELECT v.*, '{}'::jsonb FROM (VALUES `+strings.Join(rows, ",\n")+`) AS v`); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "2"}))
	waitfor.True(t, 30*time.Second, "no row left pending", func() bool {
		return db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE NOT processed`) == 0
	})
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter`); n != 2 {
		t.Fatalf("%d dead letters, want the 2 broken rows", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE event_type LIKE 'broken.%'
		AND last_error LIKE 'migration 021: broken row: webhook_outbox.fanout % is negative%'`); n != 2 {
		t.Fatalf("%d dead letters name the broken column, want 2", n)
	}
	got := map[string]map[string]bool{}
	for _, d := range c.deliveries() {
		if !d.SignatureOK {
			t.Fatalf("%s to %s: bad signature", d.Event, d.Endpoint)
		}
		if got[d.Event] == nil {
			got[d.Event] = map[string]bool{}
		}
		got[d.Event][d.Endpoint] = true
	}
	for event, to := range map[string][]string{
		"fine.event": {"shop", "default"}, "far.event": {"shop", "default"}, "far.delivery": {"shop"}, "held.nokey": {"shop"},
		"fanto.delivery": {"shop"}, "fandone.only": {"shop", "default"}, "fanto.nolease": {"shop", "default"},
	} {
		for _, name := range to {
			if !got[event][name] {
				t.Errorf("%s was not delivered to %s (got %v)", event, name, got[event])
			}
		}
	}
	_, status, _ := ops(t, db, "status", "--json")
	if !strings.Contains(status, `"pending_due":0`) || !strings.Contains(status, `"in_flight":0`) {
		t.Errorf("status counts rows still:\n%s", status)
	}
	_ = p
}
