package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// --filter is checked by the database when it is set: text that is not
// jsonpath is an exit 2 naming --filter with PostgreSQL's message;
// list and status show the filter as stored; --no-filter removes it.
func TestEndpointsFilterFlag(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	_, errs := endpointsCLI(t, db, exitUsage, "add", "--name", "big", "--url", "https://big.example.com/h", "--secret", cliSecret,
		"--filter", "$.amount ?? (@ >= 100)")
	if !strings.Contains(errs, "--filter: ") || !strings.Contains(errs, "syntax error") || !strings.Contains(errs, "jsonpath") {
		t.Fatalf("bad jsonpath: %s", errs)
	}
	_, errs = endpointsCLI(t, db, exitUsage, "add", "--name", "big", "--url", "https://big.example.com/h", "--secret", cliSecret,
		"--filter", `$.email ? (@ like_regex "(")`)
	if !strings.Contains(errs, "--filter: invalid regular expression") {
		t.Fatalf("bad regex: %s", errs)
	}
	_, errs = endpointsCLI(t, db, exitUsage, "add", "--name", "big", "--url", "https://big.example.com/h", "--secret", cliSecret,
		"--filter", `$.amount ? (@ >= $min)`)
	if !strings.Contains(errs, "--filter: a filter reads no variables") {
		t.Fatalf("variable: %s", errs)
	}
	endpointsCLI(t, db, exitUsage, "add", "--name", "big", "--url", "https://big.example.com/h", "--secret", cliSecret, "--filter", " ")
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("%d endpoints added by refused commands", n)
	}

	out, _ := endpointsCLI(t, db, exitOK, "add", "--name", "big", "--url", "https://big.example.com/h", "--secret", cliSecret,
		"--filter", "$.amount ? (@ >= 100)")
	if !strings.Contains(out, "payload filter $.amount ? (@ >= 100)") {
		t.Fatalf("add: %s", out)
	}
	endpointsCLI(t, db, exitOK, "add", "--name", "plain", "--url", "https://plain.example.com/h", "--secret", cliSecret)
	out, _ = endpointsCLI(t, db, exitOK, "list")
	if !strings.HasPrefix(out, "NAME") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "FILTER") ||
		!strings.Contains(lineOf(out, "big"), `$."amount"?(@ >= 100)`) || strings.Fields(lineOf(out, "plain"))[3] != "-" {
		t.Fatalf("list:\n%s", out)
	}
	out, _ = endpointsCLI(t, db, exitOK, "list", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0]["filter"] != `$."amount"?(@ >= 100)` || list[1]["filter"] != nil {
		t.Fatalf("list --json: %s", out)
	}
	code, out, errs := ops(t, db, "status")
	if code != exitOK || !strings.Contains(out, "FILTER") || !strings.Contains(lineOf(out, "big"), `$."amount"?(@ >= 100)`) {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = ops(t, db, "status", "--json")
	var st outboxStatus
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || len(st.Endpoints) != 2 ||
		st.Endpoints[0].Filter != `$."amount"?(@ >= 100)` || st.Endpoints[1].Filter != "" {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}

	_, errs = endpointsCLI(t, db, exitUsage, "update", "big", "--filter", "$.amount ? (@ >=")
	if !strings.Contains(errs, "--filter: ") || !strings.Contains(errs, "jsonpath") {
		t.Fatalf("update, bad jsonpath: %s", errs)
	}
	endpointsCLI(t, db, exitUsage, "update", "big", "--filter", "$", "--no-filter")
	out, _ = endpointsCLI(t, db, exitOK, "update", "big", "--filter", `$.customer.id ? (@ == "c_42")`)
	if !strings.Contains(out, `payload filter $.customer.id ? (@ == "c_42")`) ||
		db.Count(t, `SELECT count(*) FROM webhook_endpoints WHERE name = 'big' AND payload_filter::text = '$."customer"."id"?(@ == "c_42")'`) != 1 {
		t.Fatalf("update --filter: %s", out)
	}
	out, _ = endpointsCLI(t, db, exitOK, "update", "big", "--no-filter")
	if !strings.Contains(out, "no payload filter") || db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE payload_filter IS NOT NULL") != 0 {
		t.Fatalf("update --no-filter: %s", out)
	}
	if out, _ = endpointsCLI(t, db, exitOK, "list"); strings.Fields(lineOf(out, "big"))[3] != "-" {
		t.Fatalf("list after --no-filter:\n%s", out)
	}
}

// A worker delivers an event only to the endpoints whose filter finds
// something in its payload: a threshold, a nested array's element; a
// strict filter that errors on a payload is no match, and the event still
// reaches the others; an event no endpoint takes is processed unrouted.
func TestPayloadFiltersEndToEnd(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	big, sku, strict, all := newConsumer(t, nil), newConsumer(t, nil), newConsumer(t, nil), newConsumer(t, nil)
	addEndpoint(t, db, "big", big)
	addEndpoint(t, db, "sku", sku, "order.*")
	addEndpoint(t, db, "strict", strict)
	addEndpoint(t, db, "all", all, "order.created")
	endpointsCLI(t, db, exitOK, "update", "big", "--filter", "$.amount ? (@ >= 100)")
	endpointsCLI(t, db, exitOK, "update", "sku", "--filter", `$.items[*].sku ? (@ == "X-1")`)
	endpointsCLI(t, db, exitOK, "update", "strict", "--filter", "strict $.a.b")
	startInProcess(t, endpointsOnly(db, nil))

	enqueue(t, db, "order.created", `{"amount": 150, "items": [{"sku": "A"}, {"sku": "X-1"}]}`, "")
	enqueue(t, db, "order.created", `{"amount": 20, "items": []}`, "")
	enqueue(t, db, "misc", `{"a": {"b": 1}}`, "")
	enqueue(t, db, "misc", `{"amount": 5}`, "")
	waitfor.True(t, 20*time.Second, "every row processed", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	for name, want := range map[string]int{"big": 1, "sku": 1, "strict": 1, "all": 2} {
		c := map[string]*consumer{"big": big, "sku": sku, "strict": strict, "all": all}[name]
		if got := len(c.deliveries()); got != want {
			t.Errorf("%s: %d deliveries, want %d", name, got, want)
		}
	}
	if !strings.Contains(string(big.deliveries()[0].Body), `"amount": 150`) && !strings.Contains(string(big.deliveries()[0].Body), `"amount":150`) {
		t.Errorf("big got %s", big.deliveries()[0].Body)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type = 'misc' AND fanout = 0 AND processed"); n != 1 {
		t.Errorf("%d misc events unrouted, want 1 (the one no filter took)", n)
	}
}
