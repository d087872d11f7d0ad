package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// deadLetterOf waits for the dead letter of the event of type typ and
// returns its attempts and last error.
func deadLetterOf(t *testing.T, db *testdb.DB, typ string) (int, string) {
	t.Helper()
	waitfor.True(t, 30*time.Second, typ+" dead-lettered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE event_type = $1", typ) == 1
	})
	var attempts int
	var lastError string
	if err := db.Pool.QueryRow(context.Background(), "SELECT attempts, last_error FROM webhook_dead_letter WHERE event_type = $1",
		typ).Scan(&attempts, &lastError); err != nil {
		t.Fatal(err)
	}
	return attempts, lastError
}

// A real worker process checks each delivery against the catalog before
// its first attempt: a payload that does not match its type's schema is
// dead-lettered with the validation error, never sent, no attempt made;
// under strict mode a delivery of a type the catalog does not list (one a
// producer targeted at an endpoint, which the database does not check)
// is dead-lettered with the database's text; a type added while the worker
// runs is delivered at once, never refused by a catalog it had not
// reloaded yet. Neither the logs nor the dead letter quote the payload.
func TestWorkerChecksPayloadsAgainstTheCatalog(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	c.secret = cliSecret
	schema := jsonFileOf(t, "paid.json", paidSchema)
	typesCLI(t, db, exitOK, "add", "invoice.paid", "--schema-file", schema)
	endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", c.srv.URL+"/billing", "--events", "invoice.*", "--secret", cliSecret)
	typesCLI(t, db, exitOK, "strict", "on")
	db.Insert(t, "invoice.paid", `{"id": "in_1", "amount": 5}`, `{"id": "in_2", "amount": "card-4242-secret"}`)
	// A row of an unknown type targeted at the endpoint, past the
	// database's check.
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, endpoint_id)
		SELECT 'invoice.unknown', '{"id": "in_4"}', id FROM webhook_endpoints WHERE name = 'billing'`); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, envFor(db.URL, nil, nil))

	attempts, lastError := deadLetterOf(t, db, "invoice.paid")
	if want := "payload does not match the schema of invoice.paid: /amount: got string, want integer"; attempts != 0 || lastError != want {
		t.Errorf("dead letter: %d attempts, %q; want 0 and %q", attempts, lastError, want)
	}
	attempts, lastError = deadLetterOf(t, db, "invoice.unknown")
	if want := "unknown event type invoice.unknown: the event catalog is strict"; attempts != 0 || lastError != want {
		t.Errorf("dead letter: %d attempts, %q; want 0 and %q", attempts, lastError, want)
	}
	waitProcessed(t, db, 3, 30*time.Second)

	// A type added while the worker runs, and written at once: the
	// worker's catalog, a moment old, does not list it; strict, it checks
	// the catalog again before refusing.
	typesCLI(t, db, exitOK, "add", "invoice.voided")
	db.Insert(t, "invoice.voided", `{"id": "in_3"}`)
	waitfor.True(t, 30*time.Second, "invoice.voided delivered", func() bool {
		for _, d := range c.deliveries() {
			if d.Event == "invoice.voided" {
				return true
			}
		}
		return false
	})

	var sent []string
	for _, d := range c.deliveries() {
		sent = append(sent, d.Event+" "+string(d.Body))
		if !d.SignatureOK {
			t.Errorf("%s: signature not verified", d.Event)
		}
	}
	if len(sent) != 2 || !strings.Contains(sent[0], `"in_1"`) || !strings.HasPrefix(sent[1], "invoice.voided") {
		t.Errorf("sent %q, want in_1 and invoice.voided only", sent)
	}
	// The dead letters' outcomes were written before (with the attempt
	// rows they would have had): only the two deliveries made attempts.
	waitfor.True(t, 30*time.Second, "the deliveries' attempts recorded", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_attempts") >= 2
	})
	if n := db.Count(t, "SELECT count(*) FROM webhook_attempts"); n != 2 {
		t.Errorf("%d attempts recorded, want 2 (the refused ones made none)", n)
	}
	if logs := p.logs.String(); strings.Contains(logs, "4242") || !strings.Contains(logs, "refused before its first attempt") {
		t.Errorf("logs quote the payload, or say nothing of the refusal:\n%s", logs)
	}
}
