package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// With WEBHOOK_EGRESS_ALLOW_LOOPBACK=false, a real worker process refuses to
// connect to a loopback consumer, reached as localhost (WEBHOOK_URL: an IP
// literal the guard refuses is a start-up error) and as 127.0.0.1 (an
// endpoint of the table): the consumers see nothing, each delivery is
// dead-lettered at once (no retry) with a reason naming the guard and the
// class, and the refusals are counted. Only loopback is involved: no packet
// goes anywhere else.
func TestEgressGuardRefusesLoopbackWhenAsked(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	byName := newConsumer(t, nil)
	var id string
	err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('local', $1, 'whsec_x')
		RETURNING id::text`, byName.srv.URL).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_EGRESS_ALLOW_LOOPBACK": "false", "WEBHOOK_MAX_ATTEMPTS": "10",
		"WEBHOOK_URL": strings.Replace(c.srv.URL, "127.0.0.1", "localhost", 1)}))
	base := startedWorker(t, p.logs)
	for range 3 {
		enqueue(t, db, "e", `{}`, "")
	}
	waitfor.True(t, 20*time.Second, "every delivery dead-lettered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE attempts = 1 AND last_error LIKE '%egress guard: refused a loopback address%'") == 6
	})
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1", id); n != 3 {
		t.Fatalf("%d dead letters of the endpoint reached as 127.0.0.1, want 3", n)
	}
	if n := len(c.deliveries()) + len(byName.deliveries()); n != 0 {
		t.Fatalf("the consumers saw %d requests", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 0 {
		t.Fatalf("%d rows pending: a refused dial must not be retried", n)
	}
	_, metrics := httpGet(base + "/metrics")
	// localhost may resolve to ::1 and 127.0.0.1: one or two refusals each.
	line := lineOf(metrics, `fluxora_webhook_egress_refused_total{class="loopback"}`)
	n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil || n < 6 || n > 9 {
		t.Fatalf("refusals metric: %q", line)
	}
}
