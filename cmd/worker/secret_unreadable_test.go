package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// An endpoint whose secret the running worker cannot open (stored since it
// started, under a key its key file does not hold) keeps its rows pending:
// never dead-lettered, no attempt spent, nothing sent unsigned, however
// long the worker runs; the gauge, `worker status` and its JSON say so,
// and the other endpoint is served meanwhile. A worker started with the
// key sends them all, signed, and the mark goes.
func TestSecretUnreadableKeepsRowsPending(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	c.secret = cliSecret
	endpointsCLI(t, db, exitOK, "add", "--name", "shop", "--url", c.srv.URL+"/shop", "--secret", cliSecret)
	const maxAttempts = 3
	env := endpointsOnly(db, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "3"})
	p := startProcess(t, env)
	base := startedWorker(t, p.logs)

	// Stored after the worker started, under a key it does not hold.
	dir := t.TempDir()
	other := writeKeyFile(dir, "other", "test-9")
	if code, out, errs := keysCLI(t, db, other, "endpoints", "add", "--name", "late", "--url", c.srv.URL+"/late", "--secret", cliSecret); code != exitOK {
		t.Fatalf("add late: exit %d %s%s", code, out, errs)
	}
	const n = 4
	for range n {
		enqueue(t, db, "order.paid", `{"n": 1}`, "")
	}
	waitfor.True(t, 30*time.Second, "shop served", func() bool { return sentTo(c, "shop") == n })

	// Longer than the attempts would take as failures (MaxAttempts ×
	// BackoffMax): each late row deferred more often than that, unless it
	// was dead-lettered.
	waitfor.True(t, 30*time.Second, "late's rows deferred past their attempts, or dead-lettered", func() bool {
		return metricValue(t, base, `fluxora_webhook_deliveries_total{endpoint="late",outcome="deferred"}`) >= n*(maxAttempts+1) ||
			db.Count(t, `SELECT count(*) FROM webhook_dead_letter`) > 0
	})
	if dead := db.Count(t, `SELECT count(*) FROM webhook_dead_letter`); dead != 0 {
		t.Fatalf("%d rows dead-lettered for a secret the worker cannot open", dead)
	}
	late := `SELECT count(*) FROM webhook_outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id WHERE e.name = 'late'`
	if pending, spent := db.Count(t, late+` AND NOT o.processed AND o.attempt = 1`), db.Count(t, late+` AND (o.processed OR o.attempt <> 1)`); pending != n || spent != 0 {
		t.Fatalf("late: %d rows pending at attempt 1 (want %d), %d processed or past attempt 1", pending, n, spent)
	}
	if got := sentTo(c, "late"); got != 0 {
		t.Fatalf("%d requests sent to late, whose secret the worker cannot open", got)
	}
	if v := metricValue(t, base, `fluxora_webhook_endpoint_secret_unreadable{endpoint="late"}`); v != 1 {
		t.Fatalf("secret_unreadable{late} = %v, want 1", v)
	}
	if v := metricValue(t, base, `fluxora_webhook_endpoint_secret_unreadable{endpoint="shop"}`); v != 0 {
		t.Fatalf("secret_unreadable{shop} = %v, want 0", v)
	}
	_, status, _ := ops(t, db, "status", "--endpoint", "late")
	if !strings.Contains(status, `rows kept pending: a worker found its secret cannot be opened: sealed with key id "test-9"`) {
		t.Fatalf("status does not say late's secret cannot be opened:\n%s", status)
	}
	_, js, _ := ops(t, db, "status", "--json")
	if !strings.Contains(js, `"secret_unreadable":"its secret cannot be opened: sealed with key id \"test-9\"`) {
		t.Fatalf("status --json does not say it:\n%s", js)
	}
	noSecretIn(t, "logs", p.logs.String())

	// The worker restarted with a key file holding both keys sends them.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != exitOK {
		t.Fatalf("worker exit %d", code)
	}
	one, _ := os.ReadFile(keyFilePath())
	nine, _ := os.ReadFile(other)
	both := filepath.Join(dir, "both")
	if err := os.WriteFile(both, append(one, nine...), 0o600); err != nil {
		t.Fatal(err)
	}
	env["WEBHOOK_SECRETS_KEY_FILE"] = both
	p2 := startProcess(t, env)
	base2 := startedWorker(t, p2.logs)
	waitfor.True(t, 30*time.Second, "late served", func() bool { return sentTo(c, "late") == n })
	for _, d := range c.deliveries() {
		if !d.SignatureOK || d.Attempt != 1 {
			t.Fatalf("%s: signature ok %v, attempt %d", d.Endpoint, d.SignatureOK, d.Attempt)
		}
	}
	if dead := db.Count(t, `SELECT count(*) FROM webhook_dead_letter`); dead != 0 {
		t.Fatalf("%d dead letters", dead)
	}
	if v := metricValue(t, base2, `fluxora_webhook_endpoint_secret_unreadable{endpoint="late"}`); v != 0 {
		t.Fatalf("secret_unreadable{late} = %v after the restart, want 0", v)
	}
	if _, status, _ := ops(t, db, "status", "--endpoint", "late"); strings.Contains(status, "cannot be opened") {
		t.Fatalf("status still says the secret cannot be opened:\n%s", status)
	}
}

// sentTo counts the requests c received for the endpoint of that name.
func sentTo(c *consumer, name string) int {
	n := 0
	for _, d := range c.deliveries() {
		if d.Endpoint == name {
			n++
		}
	}
	return n
}
