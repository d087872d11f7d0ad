package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

const paidSchema = `{"type": "object", "required": ["id", "amount"],
	"properties": {"id": {"type": "string"}, "amount": {"type": "integer", "minimum": 1}}}`

// typesCLI runs `worker event-types ARGS` and fails the test unless it
// exits with want; it returns stdout and stderr.
func typesCLI(t *testing.T, db *testdb.DB, want int, args ...string) (string, string) {
	t.Helper()
	code, out, errs := ops(t, db, append([]string{"event-types"}, args...)...)
	if code != want {
		t.Fatalf("worker event-types %q: exit %d, want %d\n%s%s", args, code, want, out, errs)
	}
	return out, errs
}

// jsonFileOf writes text to a file of the test and returns its path.
func jsonFileOf(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEventTypesCommands(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	schema := jsonFileOf(t, "paid.json", paidSchema)
	example := jsonFileOf(t, "example.json", `{"id": "in_1", "amount": 500}`)
	bad := jsonFileOf(t, "bad.json", `{"id": "in_1", "amount": 0}`)

	out, _ := typesCLI(t, db, exitOK, "add", "invoice.paid", "--description", "An invoice was paid.",
		"--schema-file", schema, "--example-file", example)
	if out != "added event type invoice.paid (schema, example)\n" {
		t.Fatalf("add: %q", out)
	}
	typesCLI(t, db, exitOK, "add", "invoice.voided")
	typesCLI(t, db, exitOK, "add", "customer.created", "--deprecated")

	t.Run("refused values change nothing", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"add", "invoice.paid"}, exitFailure, "the type exists"},
			{[]string{"add", "invoice.*"}, exitUsage, `may not hold "*"`},
			{[]string{"add", "fluxora.mine"}, exitUsage, "the worker's own"},
			{[]string{"add", "x", "--schema-file", bad}, exitOK, ""}, // a schema of its own: any JSON object
			{[]string{"add", "y", "--schema-file", schema, "--example-file", bad}, exitUsage,
				"--example-file: the example does not match the schema: payload does not match the schema of y: /amount: minimum: want 1"},
			{[]string{"add", "z", "--schema-file", jsonFileOf(t, "broken.json", `{"type": "nope"}`)}, exitUsage,
				"--schema-file: the schema does not compile"},
			{[]string{"add", "z", "--schema-file", jsonFileOf(t, "ref.json", `{"$ref": "file:///etc/passwd"}`)}, exitUsage,
				"--schema-file: the schema does not compile"},
			{[]string{"add", "z", "--example-file", jsonFileOf(t, "notjson.json", `{`)}, exitUsage, "is not JSON"},
			{[]string{"add", "z", "--schema-file", filepath.Join(t.TempDir(), "missing.json")}, exitUsage, "--schema-file: open"},
			{[]string{"add"}, exitUsage, "give exactly one event type NAME"},
			{[]string{"add", "z", "--description", strings.Repeat("d", 4097)}, exitUsage, "--description: 4097 bytes, at most 4096"},
			{[]string{"update", "invoice.paid"}, exitUsage, "give at least one of"},
			{[]string{"update", "invoice.paid", "--example-file", bad}, exitUsage, "the example does not match the schema"},
			{[]string{"update", "invoice.paid", "--no-schema", "--schema-file", schema}, exitUsage, "give one"},
			{[]string{"update", "missing", "--deprecated"}, exitFailure, `no event type named "missing"`},
			{[]string{"remove", "missing"}, exitFailure, `no event type named "missing"`},
			{[]string{"strict", "maybe"}, exitUsage, "give on, off, or nothing"},
			{[]string{"export"}, exitUsage, "the one format is openapi"},
			{[]string{"export", "--format", "yaml"}, exitUsage, "the one format is openapi"},
		} {
			_, errs := typesCLI(t, db, tc.code, tc.args...)
			if !strings.Contains(errs, tc.want) {
				t.Errorf("%q: %q, want %q", tc.args, errs, tc.want)
			}
		}
		typesCLI(t, db, exitOK, "remove", "x")
	})

	t.Run("list", func(t *testing.T) {
		out, _ := typesCLI(t, db, exitOK, "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 6 || lines[0] != "strict: off" || !strings.HasPrefix(lines[2], "NAME") ||
			!strings.HasPrefix(lines[3], "customer.created") || !strings.Contains(lines[3], "yes") ||
			!strings.HasPrefix(lines[4], "invoice.paid") || !strings.Contains(lines[4], "An invoice was paid.") {
			t.Fatalf("list:\n%s", out)
		}
		out, _ = typesCLI(t, db, exitOK, "list", "--json")
		var got []struct {
			Name       string          `json:"name"`
			Schema     json.RawMessage `json:"schema"`
			Example    json.RawMessage `json:"example"`
			Deprecated bool            `json:"deprecated"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if len(got) != 3 || got[1].Name != "invoice.paid" || !strings.Contains(string(got[1].Schema), `"minimum":1`) ||
			!strings.Contains(string(got[1].Example), `"amount":500`) || !got[0].Deprecated || got[2].Schema != nil {
			t.Fatalf("list --json:\n%s", out)
		}
	})

	t.Run("update keeps what it is not given", func(t *testing.T) {
		out, _ := typesCLI(t, db, exitOK, "update", "invoice.paid", "--deprecated", "--description", "Paid.")
		if out != "updated event type invoice.paid (schema, example, deprecated)\n" {
			t.Fatalf("update: %q", out)
		}
		out, _ = typesCLI(t, db, exitOK, "update", "invoice.paid", "--no-example", "--deprecated=false")
		if out != "updated event type invoice.paid (schema)\n" {
			t.Fatalf("update: %q", out)
		}
	})

	t.Run("strict", func(t *testing.T) {
		if out, _ := typesCLI(t, db, exitOK, "strict"); out != "strict: off\n" {
			t.Fatalf("strict: %q", out)
		}
		if out, _ := typesCLI(t, db, exitOK, "strict", "on"); out != "strict: on\n" {
			t.Fatalf("strict on: %q", out)
		}
		if out, _ := typesCLI(t, db, exitOK, "list"); !strings.HasPrefix(out, "strict: on\n") {
			t.Fatalf("list after strict on:\n%s", out)
		}
		_, err := db.Pool.Exec(context.Background(), "INSERT INTO webhook_outbox (event_type, payload) VALUES ('invoice.payed', '{}')")
		if err == nil || !strings.Contains(err.Error(), "unknown event type invoice.payed") {
			t.Fatalf("an unknown type under strict: %v", err)
		}
		code, out, errs := ops(t, db, "status")
		if code != exitOK || !strings.Contains(out, "event catalog") || !strings.Contains(out, "3 types, strict on") {
			t.Fatalf("status: %d\n%s%s", code, out, errs)
		}
		code, out, _ = ops(t, db, "status", "--json")
		var st struct {
			EventCatalog struct {
				Strict bool `json:"strict"`
				Types  int  `json:"types"`
			} `json:"event_catalog"`
		}
		if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || !st.EventCatalog.Strict || st.EventCatalog.Types != 3 {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		if out, _ := typesCLI(t, db, exitOK, "strict", "off"); out != "strict: off\n" {
			t.Fatalf("strict off: %q", out)
		}
		db.Insert(t, "invoice.payed", `{}`)
	})

	t.Run("export", func(t *testing.T) {
		out, _ := typesCLI(t, db, exitOK, "export", "--format", "openapi", "--title", "Shop", "--version", "2.1")
		var doc struct {
			OpenAPI string `json:"openapi"`
			Info    struct{ Title, Version string }
			Hooks   map[string]struct {
				Post struct {
					RequestBody struct {
						Content map[string]struct{ Schema json.RawMessage }
					} `json:"requestBody"`
				}
			} `json:"webhooks"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		paid := doc.Hooks["invoice.paid"].Post.RequestBody.Content["application/json"].Schema
		if doc.OpenAPI != "3.1.0" || doc.Info.Title != "Shop" || doc.Info.Version != "2.1" || len(doc.Hooks) != 3 ||
			!strings.Contains(string(paid), `"minimum": 1`) {
			t.Fatalf("export:\n%s", out)
		}
	})

	typesCLI(t, db, exitOK, "remove", "customer.created")
	if out, _ := typesCLI(t, db, exitOK, "list", "--json"); strings.Contains(out, "customer.created") {
		t.Fatalf("removed, still listed:\n%s", out)
	}
}

// Subscriptions are checked against the catalog once it lists a type:
// an unknown type is refused (exit 2) with the closest listed one, a
// pattern must match a type, the worker's own types always pass; nothing
// is stored on a refusal.
func TestEndpointsEventsCheckedAgainstTheCatalog(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	add := func(want int, events string) string {
		t.Helper()
		_, errs := endpointsCLI(t, db, want, "add", "--name", "e"+strings.NewReplacer("*", "x", ",", "-").Replace(events),
			"--url", "https://hooks.example.com/", "--secret", cliSecret, "--events", events)
		return errs
	}
	add(exitOK, "anything.goes") // an empty catalog checks nothing
	typesCLI(t, db, exitOK, "add", "invoice.paid")
	typesCLI(t, db, exitOK, "add", "invoice.voided")
	for _, tc := range []struct{ events, want string }{
		{"invoice.payed", "worker endpoints add: --events: unknown event type invoice.payed (did you mean invoice.paid?)\n"},
		{"invoice.paid,refund.made", "worker endpoints add: --events: unknown event type refund.made\n"},
		{"invoce.*", "worker endpoints add: --events: pattern invoce.* matches no event type of the catalog (did you mean invoice.*?)\n"},
	} {
		if errs := add(exitUsage, tc.events); errs != tc.want {
			t.Errorf("--events %s: %q, want %q", tc.events, errs, tc.want)
		}
	}
	for _, ok := range []string{"invoice.paid", "invoice.*,fluxora.endpoint.disabled", "fluxora.*", "*"} {
		add(exitOK, ok)
	}
	_, errs := endpointsCLI(t, db, exitUsage, "update", "einvoice.paid", "--events", "invoice.payed")
	if !strings.Contains(errs, "worker endpoints update: --events: unknown event type invoice.payed (did you mean invoice.paid?)") {
		t.Errorf("update: %q", errs)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE 'invoice.payed' = ANY(event_types) OR 'refund.made' = ANY(event_types)"); n != 0 {
		t.Fatalf("%d refused subscriptions stored", n)
	}
}
