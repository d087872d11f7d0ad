package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

// ops runs a subcommand in-process against db.
func ops(t *testing.T, db *testdb.DB, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_SECRETS_KEY_FILE": testKeyFile(t)}
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// deadLetters inserts dead letters directly: (delivery id, event, died ago).
func deadLetters(t *testing.T, db *testdb.DB, rows ...[3]string) {
	t.Helper()
	for _, r := range rows {
		_, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, died_at)
			VALUES ($1, $2, '{"k": 1}', 3, 500, 'gave up after 3 attempts: http 500', now() - $3::interval)`, r[0], r[1], r[2])
		if err != nil {
			t.Fatal(err)
		}
	}
}

const (
	idA = "11111111-1111-4111-8111-111111111111"
	idB = "22222222-2222-4222-8222-222222222222"
	idC = "33333333-3333-4333-8333-333333333333"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	db.Insert(t, "e", `{}`, `{}`, `{}`, `{}`)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('e', '{}', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	// One row in flight, one whose lease expired (pending again) after a
	// reclaim, one processed after a reclaim.
	_, err := db.Pool.Exec(context.Background(), `UPDATE webhook_outbox SET
		locked_until = now() + CASE id % 4 WHEN 1 THEN interval '1 minute' ELSE interval '-1 minute' END,
		lease_token = gen_random_uuid(), reclaims = CASE id % 4 WHEN 1 THEN 0 ELSE 1 END,
		processed = (id % 4 = 3), processed_at = CASE id % 4 WHEN 3 THEN now() END
		WHERE id % 4 IN (1, 2, 3) AND created_at <= now()`)
	if err != nil {
		t.Fatal(err)
	}
	deadLetters(t, db, [3]string{idA, "e", "1 hour"})
	code, out, errs := ops(t, db, "status", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s outboxStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if s.PendingDue != 2 || s.InFlight != 1 || s.ScheduledRetries != 1 || s.ProcessedLastHour != 1 || s.LeasesReclaimed != 2 ||
		s.DeadLetters != 1 || s.OldestPendingSecs < 0 {
		t.Fatalf("status %+v", s)
	}
	if code, out, _ := ops(t, db, "status"); code != 0 || !strings.Contains(out, "pending (due now)  ") || !strings.Contains(out, "in flight") ||
		!strings.Contains(out, "leases reclaimed") || !strings.Contains(out, "dead letters") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
	if code, _, _ := ops(t, db, "status", "--bogus"); code != exitUsage {
		t.Fatalf("unknown flag: exit %d", code)
	}
	if code, _, errs := ops(t, testdb.NewEmpty(t), "status"); code != exitSchema || !strings.Contains(errs, "worker migrate") {
		t.Fatalf("unmigrated: exit %d %s", code, errs)
	}
}

func TestDLQListAndReplay(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	deadLetters(t, db, [3]string{idA, "invoice.paid", "2 days"}, [3]string{idB, "stream.updated", "1 hour"}, [3]string{idC, "stream.updated", "10 minutes"})

	code, out, _ := ops(t, db, "dlq", "list", "--json", "--event", "stream.updated")
	var listed []deadLetter
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != 2 || !strings.Contains(out, idC) || strings.Contains(out, idA) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	if code, out, _ := ops(t, db, "dlq", "list"); code != 0 || !strings.Contains(out, "DELIVERY ID") || !strings.Contains(out, idA) {
		t.Fatalf("list table: exit %d\n%s", code, out)
	}

	// An unknown id replays nothing, not even the known one.
	code, _, errs := ops(t, db, "dlq", "replay", idA, "44444444-4444-4444-8444-444444444444")
	if code != exitFailure || !strings.Contains(errs, "44444444") || db.Count(t, "SELECT count(*) FROM webhook_dead_letter") != 3 {
		t.Fatalf("unknown id: exit %d %s", code, errs)
	}
	if code, _, errs := ops(t, db, "dlq", "replay", "not-a-uuid"); code != exitUsage || !strings.Contains(errs, "not-a-uuid") {
		t.Fatalf("bad uuid: exit %d %s", code, errs)
	}
	if code, _, _ := ops(t, db, "dlq", "replay"); code != exitUsage {
		t.Fatalf("no ids: exit %d", code)
	}

	code, out, errs = ops(t, db, "dlq", "replay", idA)
	if code != 0 || !strings.Contains(out, "replayed 1") {
		t.Fatalf("replay: exit %d %s %s", code, out, errs)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1 AND attempt = 1 AND NOT processed AND event_type = 'invoice.paid'", idA); n != 1 {
		t.Fatalf("replayed rows = %d", n)
	}
	// Filters: only the stream.updated that died in the last 30 minutes.
	code, out, _ = ops(t, db, "dlq", "replay", "--all", "--event", "stream.updated", "--since", "30m")
	if code != 0 || !strings.Contains(out, "replayed 1") || db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1", idC) != 1 {
		t.Fatalf("filtered replay: exit %d %s", code, out)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 1 {
		t.Fatalf("dead letters left %d, want 1", n)
	}
	if code, _, errs := ops(t, db, "dlq", "replay", "--all", "--since", "last tuesday"); code != exitUsage || !strings.Contains(errs, "--since") {
		t.Fatalf("bad time: exit %d %s", code, errs)
	}
}

func TestDLQPurge(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	deadLetters(t, db, [3]string{idA, "e", "10 days"}, [3]string{idB, "e", "1 hour"})
	code, out, _ := ops(t, db, "dlq", "purge", "--before", "7d")
	if code != exitUsage || !strings.Contains(out, "would delete 1") || db.Count(t, "SELECT count(*) FROM webhook_dead_letter") != 2 {
		t.Fatalf("dry run: exit %d %s", code, out)
	}
	code, out, _ = ops(t, db, "dlq", "purge", "--before", time.Now().Add(-7*24*time.Hour).UTC().Format(time.RFC3339), "--yes")
	if code != 0 || !strings.Contains(out, "deleted 1") || db.Count(t, "SELECT count(*) FROM webhook_dead_letter") != 1 {
		t.Fatalf("purge: exit %d %s", code, out)
	}
	if code, _, _ := ops(t, db, "dlq", "purge", "--yes"); code != exitUsage {
		t.Fatalf("missing --before: exit %d", code)
	}
	if code, out, _ := ops(t, db, "dlq", "--help"); code != 0 || !strings.Contains(out, "replay") {
		t.Fatalf("help: exit %d", code)
	}
}

func TestStatusShowsTheCircuit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	redisURL := testRedisURL(t, c)
	opt, _ := redis.ParseURL(redisURL)
	client := redis.NewClient(opt)
	defer client.Close()
	g, err := gates.New(gates.Config{Client: client, BreakerThreshold: 1, Registerer: prometheus.NewRegistry(), CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g.Record(context.Background(), c.srv.URL, webhook.Retryable, false)
	var out, errb bytes.Buffer
	env := map[string]string{"DATABASE_URL": db.URL, "REDIS_URL": redisURL, "WEBHOOK_URL": c.srv.URL}
	if code := run(context.Background(), []string{"status", "--json"}, func(k string) string { return env[k] }, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var s outboxStatus
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Circuit == nil || s.Circuit.State != "open" || s.Circuit.Failures != 1 || s.Circuit.ResetAt.IsZero() {
		t.Fatalf("circuit %+v", s.Circuit)
	}
}
