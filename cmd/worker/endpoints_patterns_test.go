package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

// Patterns are stored and shown as given; "*" alone is every type, stored
// as the empty list.
func TestEndpointsPatterns(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	out, _ := endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", "https://billing.example.com/h",
		"--events", "invoice.*, customer.created", "--secret", cliSecret)
	if !strings.Contains(out, "events invoice.*,customer.created") {
		t.Fatalf("add printed %q", out)
	}
	endpointsCLI(t, db, exitOK, "add", "--name", "ops", "--url", "https://ops.example.com/h", "--events", "fluxora.*", "--secret", cliSecret)
	endpointsCLI(t, db, exitOK, "add", "--name", "all", "--url", "https://all.example.com/h", "--events", "*", "--secret", cliSecret)
	out, _ = endpointsCLI(t, db, exitOK, "list")
	for name, events := range map[string]string{"billing": "invoice.*,customer.created", "ops": "fluxora.*", "all": "*"} {
		if f := strings.Fields(lineOf(out, name)); len(f) < 3 || f[2] != events {
			t.Errorf("list: %s shows %q, want events %s\n%s", name, f, events, out)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'all' AND event_types = '{}'"); n != 1 {
		t.Errorf(`"*" was not stored as the empty list`)
	}
	endpointsCLI(t, db, exitOK, "update", "ops", "--events", "fluxora.endpoint.*,invoice.paid")
	out, _ = endpointsCLI(t, db, exitOK, "list", "--json")
	var list []webhook.Endpoint
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(e webhook.Endpoint) bool { return e.Name == "ops" })
	if i < 0 || !slices.Equal(list[i].EventTypes, []string{"fluxora.endpoint.*", "invoice.paid"}) {
		t.Errorf("list --json: %s", out)
	}
}
