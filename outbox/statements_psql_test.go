package outbox_test

import (
	"context"
	"os"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// Every statement of queries/ is one PostgreSQL takes as written once psql
// has put a literal in each of its variables: each is planned (EXPLAIN,
// which runs nothing) with NULL for every parameter.
func TestStatementsPlanAsWritten(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for name, text := range outbox.Statements() {
		if !outbox.PsqlVar.MatchString(text) && strings.Contains(text, "@") {
			t.Errorf("%s: parameters not written as psql variables", name)
		}
		if _, err := db.Pool.Exec(ctx, "EXPLAIN "+outbox.PsqlVar.ReplaceAllString(text, "NULL")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The claim's three steps, pasted into psql as queries/claim.sql writes
// them (comments and all) after \set of their parameters, claim in one
// transaction what the store's claim would: the queue's delivery, the
// WEBHOOK_URL endpoint's, and the event's fan-out.
func TestClaimRunsInPsql(t *testing.T) {
	t.Parallel()
	psql, err := osexec.LookPath("psql")
	if err != nil {
		t.Fatalf("psql is needed to run the statements as a person would: %v", err)
	}
	db := testdb.New(t)
	ctx := context.Background()
	var id string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret, event_types)
		VALUES ('a', 'http://127.0.0.1:9/a', 'whsec_c2VjcmV0LW9mLWE=', '{}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES ('q', '{}', $1)`, id)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('e', '{}')`)
	src, err := os.ReadFile("queries/claim.sql")
	if err != nil {
		t.Fatal(err)
	}
	// The three steps; the plain path's statement follows them.
	steps, _, ok := strings.Cut(string(src), "-- name: claim_plain")
	if !ok {
		t.Fatal("queries/claim.sql: no claim_plain after the steps")
	}
	script := `\set ON_ERROR_STOP on
\set limit 10
\set lease_ms 30000
\set skip '{}'
\set room '{}'
\set default_room 10
\set env_room 10
\set env true
\pset format unaligned
\pset tuples_only on
BEGIN;
` + steps + "\nCOMMIT;\n"
	cmd := osexec.CommandContext(ctx, psql, "-X", "-q", "-d", db.URL)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	if got := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND lease_token IS NOT NULL"); got != 3 {
		t.Errorf("leased rows after the claim in psql: %d, want 3 (the queue's, the event's own, its fan-out's)\n%s", got, out)
	}
	for _, state := range []string{"|queue|", "|to_fan_out|", "|event_leased|", "|fresh|"} {
		if !strings.Contains(string(out), state) {
			t.Errorf("psql's output has no row %s:\n%s", state, out)
		}
	}
}
