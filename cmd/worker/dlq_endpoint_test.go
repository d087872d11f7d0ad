package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// dlqFixture: endpoints shop (enabled) and off (disabled); dead letters of
// the WEBHOOK_URL endpoint (one), of shop (two), of off (one) and of an
// endpoint since removed (one).
type dlqFixture struct {
	db              *testdb.DB
	shop, off, gone string // endpoint ids
}

const (
	dlEnv     = "a0000000-0000-4000-8000-000000000001"
	dlShop1   = "a0000000-0000-4000-8000-000000000002"
	dlShop2   = "a0000000-0000-4000-8000-000000000003"
	dlOff     = "a0000000-0000-4000-8000-000000000004"
	dlRemoved = "a0000000-0000-4000-8000-000000000005"
)

func newDLQFixture(t *testing.T) dlqFixture {
	t.Helper()
	f := dlqFixture{db: testdb.New(t), gone: "b0000000-0000-4000-8000-00000000dead"}
	ctx := context.Background()
	for name, id := range map[string]*string{"shop": &f.shop, "off": &f.off} {
		err := f.db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret, enabled, disabled_reason)
			VALUES ($1, 'https://hooks.example.com/', 'whsec_x', $1 = 'shop', CASE WHEN $1 = 'off' THEN '410 Gone' END) RETURNING id::text`, name).Scan(id)
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, dl := range [][3]any{{dlEnv, nil, "3 hours"}, {dlShop1, f.shop, "2 hours"}, {dlShop2, f.shop, "1 hour"}, {dlOff, f.off, "30 minutes"}, {dlRemoved, f.gone, "10 minutes"}} {
		_, err := f.db.Pool.Exec(ctx, `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, died_at)
			VALUES ($1, 'order.created', '{"k": 1}', 2, 500, 'http 500', $2, now() - $3::interval)`, dl[0], dl[1], dl[2])
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f dlqFixture) left(t *testing.T) int {
	return f.db.Count(t, "SELECT count(*) FROM webhook_dead_letter")
}

func TestDLQListByEndpoint(t *testing.T) {
	t.Parallel()
	f := newDLQFixture(t)
	code, out, errs := ops(t, f.db, "dlq", "list")
	if code != 0 || !strings.Contains(out, "ENDPOINT") {
		t.Fatalf("list: exit %d %s%s", code, out, errs)
	}
	for id, name := range map[string]string{dlEnv: "default", dlShop1: "shop", dlOff: "off", dlRemoved: "(removed)"} {
		if !strings.Contains(out, id+"  "+name+" ") {
			t.Errorf("%s not shown with endpoint %s:\n%s", id, name, out)
		}
	}
	for _, tc := range []struct {
		endpoint string
		want     []string
	}{
		{"shop", []string{dlShop2, dlShop1}},
		{"default", []string{dlEnv}},
		{"off", []string{dlOff}},
	} {
		code, out, errs := ops(t, f.db, "dlq", "list", "--json", "--endpoint", tc.endpoint)
		var got []string
		var list []deadLetter
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		for _, d := range list {
			if d.Endpoint != tc.endpoint {
				t.Errorf("--endpoint %s: a dead letter of %q", tc.endpoint, d.Endpoint)
			}
			got = append(got, d.DeliveryID)
		}
		if code != 0 || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("--endpoint %s: exit %d, %v, want %v %s", tc.endpoint, code, got, tc.want, errs)
		}
	}
	if code, _, errs := ops(t, f.db, "dlq", "list", "--endpoint", "ghost"); code != exitFailure || !strings.Contains(errs, `no endpoint named "ghost"`) {
		t.Fatalf("unknown endpoint: exit %d %s", code, errs)
	}
}

// A dead letter replayed by id goes back to its own endpoint only; an id
// whose endpoint is disabled or removed replays nothing at all.
func TestDLQReplayByIDKeepsTheEndpoint(t *testing.T) {
	t.Parallel()
	f := newDLQFixture(t)
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{dlShop1, dlOff}, "endpoint off is disabled: run `worker endpoints enable off` first (nothing replayed)"},
		{[]string{dlRemoved}, "dead letters of a removed endpoint (id " + f.gone + ")"},
	} {
		code, _, errs := ops(t, f.db, append([]string{"dlq", "replay"}, tc.ids...)...)
		if code != exitFailure || !strings.Contains(errs, tc.want) || f.left(t) != 5 {
			t.Fatalf("%v: exit %d %s (%d left)", tc.ids, code, errs, f.left(t))
		}
	}
	if code, out, errs := ops(t, f.db, "dlq", "replay", dlShop1, dlEnv); code != 0 || !strings.Contains(out, "replayed 2") {
		t.Fatalf("replay: exit %d %s%s", code, out, errs)
	}
	if n := f.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1 AND endpoint_id = $2 AND fanout IS NULL AND attempt = 1", dlShop1, f.shop); n != 1 {
		t.Fatalf("shop's dead letter replayed as %d targeted rows", n)
	}
	if n := f.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1 AND endpoint_id IS NULL AND fanout = 1", dlEnv); n != 1 {
		t.Fatalf("the env endpoint's dead letter replayed as %d rows with fanout 1", n)
	}
	// The worker's claim sends the env dead letter to the env endpoint only:
	// no fan-out to shop again.
	s, err := outbox.New(f.db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Claim(context.Background(), webhook.Query{Limit: 10, Lease: time.Minute, Env: true})
	if err != nil || b.FannedOut != 0 || len(b.Rows) != 2 || f.db.Count(t, "SELECT count(*) FROM webhook_outbox") != 2 {
		t.Fatalf("claim after replay: %+v %v", b, err)
	}
}

// --endpoint and --all replay what they can and say on stderr what they
// skipped and why.
func TestDLQReplayByEndpoint(t *testing.T) {
	t.Parallel()
	f := newDLQFixture(t)
	code, out, errs := ops(t, f.db, "dlq", "replay", "--endpoint", "shop")
	if code != 0 || !strings.Contains(out, "replayed 2") || errs != "" ||
		f.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id = $1 AND fanout IS NULL", f.shop) != 2 {
		t.Fatalf("--endpoint shop: exit %d %s%s", code, out, errs)
	}
	code, out, errs = ops(t, f.db, "dlq", "replay", "--endpoint", "off")
	if code != 0 || !strings.Contains(out, "replayed 0") || !strings.Contains(errs, "skipped 1 dead letters of endpoint off: endpoint off is disabled: run `worker endpoints enable off` first") {
		t.Fatalf("--endpoint off: exit %d %s%s", code, out, errs)
	}
	code, out, errs = ops(t, f.db, "dlq", "replay", "--all")
	if code != 0 || !strings.Contains(out, "replayed 1") || !strings.Contains(errs, "endpoint off is disabled") ||
		!strings.Contains(errs, "skipped 1 dead letters of a removed endpoint") || f.left(t) != 2 {
		t.Fatalf("--all: exit %d %s%s", code, out, errs)
	}
	if code, out, errs := ops(t, f.db, "endpoints", "enable", "off"); code != 0 {
		t.Fatalf("enable: %s%s", out, errs)
	}
	if code, out, _ := ops(t, f.db, "dlq", "replay", "--endpoint", "off"); code != 0 || !strings.Contains(out, "replayed 1") {
		t.Fatalf("after enable: exit %d %s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--endpoint", "ghost"}, exitFailure, `--endpoint: no endpoint named "ghost"`},
		{[]string{dlRemoved, "--endpoint", "shop"}, exitUsage, "not both"},
		{[]string{dlRemoved, "--all"}, exitUsage, "not both"},
	} {
		code, _, errs := ops(t, f.db, append([]string{"dlq", "replay"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %s", tc.args, code, errs)
		}
	}
}

func TestDLQPurgeByEndpoint(t *testing.T) {
	t.Parallel()
	f := newDLQFixture(t)
	code, out, _ := ops(t, f.db, "dlq", "purge", "--endpoint", "shop", "--before", "90m")
	if code != exitUsage || !strings.Contains(out, "would delete 1") {
		t.Fatalf("dry run: exit %d %s", code, out)
	}
	code, out, _ = ops(t, f.db, "dlq", "purge", "--endpoint", "shop", "--before", "0d", "--yes")
	if code != 0 || !strings.Contains(out, "deleted 2") || f.db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1", f.shop) != 0 {
		t.Fatalf("purge shop: exit %d %s", code, out)
	}
	code, out, _ = ops(t, f.db, "dlq", "purge", "--endpoint", "default", "--before", "0d", "--yes")
	if code != 0 || !strings.Contains(out, "deleted 1") || f.db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id IS NULL") != 0 || f.left(t) != 2 {
		t.Fatalf("purge default: exit %d %s", code, out)
	}
	if code, _, errs := ops(t, f.db, "dlq", "purge", "--endpoint", "ghost", "--before", "0d", "--yes"); code != exitFailure || !strings.Contains(errs, "ghost") {
		t.Fatalf("unknown endpoint: exit %d %s", code, errs)
	}
}
