package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// A whole run's logs: one line per failed attempt and per dead letter with
// the fields an operator needs, and never a secret, a password or a payload.
func TestLogsCarryFactsNotSecrets(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, func(d delivery) int {
		switch {
		case strings.Contains(string(d.Body), "reject"):
			return http.StatusBadRequest
		case d.Attempt == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	// Trust authentication ignores the password; it must not appear anyway.
	dbURL := strings.Replace(db.URL, "postgres@", "postgres:FAKEPASSWORD123@", 1)
	env := envFor(dbURL, c, map[string]string{"LOG_LEVEL": "debug"})
	p := startProcess(t, env)
	db.Insert(t, "secretive.event", `{"marker": "PAYLOAD-TEXT-42"}`, `{"marker": "reject PAYLOAD-TEXT-43"}`)
	waitfor.True(t, 20*time.Second, "one delivered after a retry, one dead-lettered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0 &&
			db.Count(t, "SELECT count(*) FROM webhook_dead_letter") == 1
	})
	logs := p.logs.String()
	for _, secret := range []string{testSecret, "FAKEPASSWORD123", "PAYLOAD-TEXT"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("logs contain %q:\n%s", secret, logs)
		}
	}
	var failed, dead bool
	for _, line := range strings.Split(logs, "\n") {
		has := func(keys ...string) bool {
			for _, k := range keys {
				if !strings.Contains(line, `"`+k+`":`) {
					return false
				}
			}
			return true
		}
		if strings.Contains(line, "attempt failed") && has("delivery_id", "event", "attempt", "status", "duration_ms", "error") {
			failed = true
		}
		if strings.Contains(line, "dead-lettered") && has("delivery_id", "event", "attempt", "status", "duration_ms", "error") {
			dead = true
		}
	}
	if !failed || !dead {
		t.Fatalf("missing failed-attempt (%v) or dead-letter (%v) line:\n%s", failed, dead, logs)
	}
}
