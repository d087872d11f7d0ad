package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/refusingproxy"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// With WEBHOOK_EGRESS_ALLOW_LOOPBACK=false, a real worker process refuses to
// connect to a loopback consumer, whether its endpoint's URL spells the
// address 127.0.0.1 or 2130706433 (the same address, read as browsers
// read it, never sent to DNS): the consumers see nothing, each delivery is
// dead-lettered at once (no retry) with a reason naming the guard and the
// class, and the refusals are counted, one a delivery. Only loopback is
// involved: no packet goes anywhere else, and no name is resolved. (A name
// resolved to a refused address is sender.TestResolvedNamesGoThroughControl,
// with a resolver stub.)
func TestEgressGuardRefusesLoopbackWhenAsked(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	plain, spelled := newConsumer(t, nil), newConsumer(t, nil)
	ids := map[string]string{}
	for name, u := range map[string]string{"plain": plain.srv.URL, "spelled": strings.Replace(spelled.srv.URL, "127.0.0.1", "2130706433", 1)} {
		var id string
		err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret) VALUES ($1, $2, 'whsec_x')
			RETURNING id::text`, name, u).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	p := startProcess(t, baseEnv(db, nil, map[string]string{"WEBHOOK_EGRESS_ALLOW_LOOPBACK": "false", "WEBHOOK_MAX_ATTEMPTS": "10"}))
	base := startedWorker(t, p.logs)
	for range 3 {
		enqueue(t, db, "e", `{}`, "")
	}
	waitfor.True(t, 20*time.Second, "every delivery dead-lettered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE attempts = 1 AND last_error LIKE '%egress guard: refused a loopback address (127.0.0.1)%'") == 6
	})
	for name, id := range ids {
		if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1", id); n != 3 {
			t.Fatalf("%d dead letters of the endpoint %s, want 3", n, name)
		}
	}
	if n := len(plain.deliveries()) + len(spelled.deliveries()); n != 0 {
		t.Fatalf("the consumers saw %d requests", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 0 {
		t.Fatalf("%d rows pending: a refused dial must not be retried", n)
	}
	_, metrics := httpGet(base + "/metrics")
	line := lineOf(metrics, `fluxora_webhook_egress_refused_total{class="loopback"}`)
	n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil || n != 6 {
		t.Fatalf("refusals metric: %q, want 6", line)
	}
}

// An IP address the egress guard refuses, in any spelling, is refused
// where it is given, before anything is stored or started: WEBHOOK_URL at
// start-up, and `endpoints add|update --url` (exit 2, naming the address
// and its class). Checked on the addresses themselves: nothing is dialled.
func TestEgressRefusedSpellingsAreRefusedWhereGiven(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	env := func(extra map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_SECRETS_KEY_FILE": testKeyFile(t)}[k]
		}
	}
	for _, tc := range []struct {
		url, want string
		extra     map[string]string
	}{
		{"https://012.0.0.1/", "10.0.0.1, private", nil},
		{"https://167772161/", "10.0.0.1, private", nil},
		{"https://0xa9fea9fe/", "169.254.169.254, link-local", nil},
		{"https://0/", "0.0.0.0, unspecified", nil},
		{"http://0x7f.1:9/", "127.0.0.1, loopback", map[string]string{"WEBHOOK_EGRESS_ALLOW_LOOPBACK": "false"}},
		// Written in other characters than ASCII, read as the HTTP client
		// maps them (IDNA), and the IPv6 forms that embed IPv4.
		{"https://10.0.0.①/", "10.0.0.1, private", nil},
		{"https://１０．０．０．１/", "10.0.0.1, private", nil},
		{"https://169.254.169.②⑤④/", "169.254.169.254, link-local", nil},
		{"https://10。0。0。1:8443/", "10.0.0.1, private", nil},
		{"https://10｡0｡0｡1/", "10.0.0.1, private", nil},
		{"https://[::a9fe:a9fe]/", "::a9fe:a9fe, link-local", nil},
		{"https://[::ffff:0:a00:1]/", "::ffff:0:a00:1, private", nil},
		{"https://[64:ff9b:1::a9fe:a9fe]/", "64:ff9b:1::a9fe:a9fe, link-local", nil},
		{"http://127.0.0.①:9/", "127.0.0.1, loopback", map[string]string{"WEBHOOK_EGRESS_ALLOW_LOOPBACK": "false"}},
		{"https://[::127.0.0.1]/", "::7f00:1, loopback", map[string]string{"WEBHOOK_EGRESS_ALLOW_LOOPBACK": "false"}},
	} {
		var out, errb strings.Builder
		code := run(context.Background(), []string{"endpoints", "add", "--name", "x", "--url", tc.url}, env(tc.extra), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), tc.want) || !strings.Contains(errb.String(), "WEBHOOK_EGRESS_ALLOW") {
			t.Errorf("endpoints add --url %s: exit %d, %q; want 2 naming %q", tc.url, code, errb.String(), tc.want)
		}
		cfgEnv := envFor(db.URL, nil, mergeMaps(tc.extra, map[string]string{"WEBHOOK_URL": tc.url, "WEBHOOK_SECRET": "s"}))
		if _, err := loadConfig(func(k string) string { return cfgEnv[k] }); err == nil ||
			!strings.Contains(err.Error(), "WEBHOOK_URL: its address is "+tc.want) {
			t.Errorf("WEBHOOK_URL=%s: %v, want the guard's refusal", tc.url, err)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("%d endpoints stored", n)
	}
	// Allowed explicitly, it is stored as given.
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"endpoints", "add", "--name", "x", "--url", "https://012.0.0.1/"},
		env(map[string]string{"WEBHOOK_EGRESS_ALLOW": "10.0.0.0/8"}), &out, &errb); code != exitOK {
		t.Fatalf("with WEBHOOK_EGRESS_ALLOW: exit %d, %s", code, errb.String())
	}
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{a, b} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// With WEBHOOK_EGRESS_PROXY set the worker resolves nothing, yet it
// refuses every forbidden IP literal it can see, however the endpoint's
// URL spells it (Unicode digits and dots, which Go's HTTP client maps to
// ASCII before it writes CONNECT; IPv6 forms that embed IPv4), before the
// proxy is asked: each delivery is dead-lettered at its first attempt,
// naming the guard, and the proxy (which records requests and never
// forwards) sees no CONNECT. A name is left to the proxy, asked for as the
// client writes it.
func TestProxyNeverAskedForAForbiddenSpelling(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	proxy := refusingproxy.New(t)
	urls := map[string]string{
		"circled": "https://10.0.0.①/", "fullwidth": "https://１０．０．０．１/", "metadata": "https://169.254.169.②⑤④/",
		"ideographic": "https://10。0。0。1/", "halfwidth": "https://10｡0｡0｡1:8443/", "siit": "https://[::ffff:0:a9fe:a9fe]/",
		"compat": "https://[::a00:1]/", "nat64-local": "https://[64:ff9b:1::a9fe:a9fe]/", "name": "https://bücher.example/",
	}
	for name, u := range urls {
		if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret) VALUES ($1, $2, 'whsec_x')`, name, u); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		enqueue(t, db, "e", `{}`, name)
	}
	startInProcess(t, endpointsOnly(db, map[string]string{"WEBHOOK_EGRESS_PROXY": proxy.URL(), "WEBHOOK_MAX_ATTEMPTS": "10"}))
	waitfor.True(t, 20*time.Second, "every literal dead-lettered", func() bool {
		return db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE attempts = 1 AND last_error LIKE '%egress guard: refused a %'`) == len(urls)-1
	})
	waitfor.True(t, 20*time.Second, "the name asked of the proxy", func() bool { return len(proxy.Seen()) > 0 })
	for _, target := range proxy.Seen() {
		if target != "CONNECT xn--bcher-kva.example:443" {
			t.Errorf("the proxy was asked for %q", target)
		}
	}
}
