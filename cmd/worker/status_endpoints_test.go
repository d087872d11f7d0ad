package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// worker status shows, per endpoint, its state, pending, in flight,
// scheduled, dead letters and last error; --endpoint NAME one endpoint.
func TestStatusPerEndpoint(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO webhook_endpoints (name, url, secret) VALUES ('alpha', 'https://a.example.com/h?token=qs_sekrit', 'whsec_sekrit'),
		('beta', 'https://b.example.com/h', 'whsec_sekrit')`)
	exec(`UPDATE webhook_endpoints SET enabled = false, disabled_reason = '410 Gone', last_error = 'http 410', last_status = 410,
		last_error_at = now() WHERE name = 'beta'`)
	// alpha: 2 due, 1 in flight, 1 scheduled, 1 dead letter; an event not
	// fanned out yet belongs to no endpoint.
	exec(`INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at, locked_until, lease_token)
		SELECT 'e', '{}', id, now() + CASE g WHEN 4 THEN interval '1 hour' ELSE interval '0' END,
		       CASE g WHEN 3 THEN now() + interval '1 minute' END, CASE g WHEN 3 THEN gen_random_uuid() END
		FROM webhook_endpoints, generate_series(1, 4) g WHERE name = 'alpha'`)
	exec(`INSERT INTO webhook_outbox (event_type, payload) VALUES ('e', '{}')`)
	exec(`INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_error, endpoint_id)
		SELECT gen_random_uuid(), 'e', '{}', 3, 'http 500', id FROM webhook_endpoints WHERE name = 'alpha'`)

	code, out, errs := ops(t, db, "status", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s outboxStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Endpoints) != 2 {
		t.Fatalf("endpoints %+v (no WEBHOOK_URL and no rows of its own: no default)", s.Endpoints)
	}
	a, b := s.Endpoints[0], s.Endpoints[1]
	if a.Name != "alpha" || !a.Enabled || a.Pending != 2 || a.InFlight != 1 || a.Scheduled != 1 || a.DeadLetters != 1 {
		t.Fatalf("alpha %+v", a)
	}
	if b.Name != "beta" || b.Enabled || b.DisabledReason != "410 Gone" || b.LastError != "http 410" || b.LastStatus == nil || *b.LastStatus != 410 {
		t.Fatalf("beta %+v", b)
	}
	code, out, _ = ops(t, db, "status")
	if code != 0 || !strings.Contains(lineOf(out, "alpha"), "enabled") || !strings.Contains(lineOf(out, "beta"), "disabled: 410 Gone") ||
		!strings.Contains(lineOf(out, "beta"), "http 410") {
		t.Fatalf("table:\n%s", out)
	}
	code, out, _ = ops(t, db, "status", "--endpoint", "alpha")
	if code != 0 || !strings.Contains(out, "alpha") || strings.Contains(out, "beta") {
		t.Fatalf("--endpoint alpha: exit %d\n%s", code, out)
	}
	if code, _, errs := ops(t, db, "status", "--endpoint", "nope"); code != exitFailure || !strings.Contains(errs, `"nope"`) {
		t.Fatalf("unknown endpoint: exit %d %s", code, errs)
	}
	for _, o := range []string{out} {
		if strings.Contains(o, "sekrit") {
			t.Fatalf("status prints a secret or a query string:\n%s", o)
		}
	}
	_, all, _ := ops(t, db, "status", "--json")
	if strings.Contains(all, "sekrit") {
		t.Fatalf("status --json prints a secret or a query string:\n%s", all)
	}
}
