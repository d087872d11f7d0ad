package eventtypes_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fluxora/webhook-worker/eventtypes"
	"github.com/fluxora/webhook-worker/webhook"
)

// The export is an OpenAPI 3.1 document the specification's own JSON
// Schema accepts, which parses as JSON and as YAML; its webhooks list
// every type of the catalog, each a POST whose request body is the
// type's schema as stored (any JSON without one) with its example, and
// its security schemes are the two signature headers.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	types := []webhook.EventType{
		{Name: "invoice.paid", Description: "An invoice was paid.", Schema: json.RawMessage(invoiceSchema),
			Example: json.RawMessage(`{"id": "in_1", "amount": 500}`)},
		{Name: "customer.created", Deprecated: true},
		{Name: "a b/é", Schema: json.RawMessage(`true`)},
	}
	doc, err := eventtypes.New(types, true, 42).OpenAPI(eventtypes.OpenAPIInfo{Title: "Billing webhooks"})
	if err != nil {
		t.Fatal(err)
	}

	spec, err := os.ReadFile("testdata/openapi-3.1-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	oas, err := eventtypes.Compile("openapi-3.1", spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := oas.Validate("openapi", doc); err != nil {
		t.Fatalf("not an OpenAPI 3.1 document: %v\n%s", err, doc)
	}
	var asYAML map[string]any
	if err := yaml.Unmarshal(doc, &asYAML); err != nil || asYAML["openapi"] != "3.1.0" {
		t.Fatalf("as YAML: %v, openapi %v", err, asYAML["openapi"])
	}

	var d struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Title, Version string
		} `json:"info"`
		Webhooks map[string]struct {
			Post struct {
				Summary     string `json:"summary"`
				Deprecated  bool   `json:"deprecated"`
				RequestBody struct {
					Required bool `json:"required"`
					Content  map[string]struct {
						Schema  json.RawMessage `json:"schema"`
						Example json.RawMessage `json:"example"`
					} `json:"content"`
				} `json:"requestBody"`
				Parameters []struct {
					Name, In string
					Required bool
					Schema   json.RawMessage
				} `json:"parameters"`
				Security []map[string][]string `json:"security"`
			} `json:"post"`
		} `json:"webhooks"`
		Components struct {
			SecuritySchemes map[string]struct {
				Type, In, Name, Description string
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if d.OpenAPI != "3.1.0" || d.Info.Title != "Billing webhooks" || d.Info.Version != "42" || len(d.Webhooks) != len(types) {
		t.Fatalf("document: %s", doc)
	}
	for _, typ := range types {
		hook, ok := d.Webhooks[typ.Name]
		if !ok {
			t.Fatalf("%s: not in webhooks", typ.Name)
		}
		body := hook.Post.RequestBody.Content["application/json"]
		want := typ.Schema
		if want == nil {
			want = json.RawMessage(`{}`)
		}
		if !sameJSON(t, body.Schema, want) || (typ.Example != nil && !sameJSON(t, body.Example, typ.Example)) ||
			!hook.Post.RequestBody.Required || hook.Post.Deprecated != typ.Deprecated || hook.Post.Summary != typ.Name {
			t.Errorf("%s: schema %s, example %s, want the catalog's %s, %s", typ.Name, body.Schema, body.Example, want, typ.Example)
		}
		if len(hook.Post.Security) != 2 {
			t.Errorf("%s: security %v", typ.Name, hook.Post.Security)
		}
		event := false
		for _, p := range hook.Post.Parameters {
			if p.Name == "x-fluxora-event" && p.In == "header" && p.Required {
				event = sameJSON(t, p.Schema, json.RawMessage(`{"type": "string", "const": `+quoteJSON(typ.Name)+`}`))
			}
		}
		if !event {
			t.Errorf("%s: no x-fluxora-event header naming the type", typ.Name)
		}
	}
	schemes := d.Components.SecuritySchemes
	if s := schemes["standardWebhooks"]; s.Type != "apiKey" || s.In != "header" || s.Name != "webhook-signature" ||
		!strings.Contains(s.Description, "HMAC-SHA256") {
		t.Errorf("standardWebhooks: %+v", s)
	}
	if s := schemes["fluxoraSignature"]; s.Type != "apiKey" || s.In != "header" || s.Name != "x-fluxora-signature" {
		t.Errorf("fluxoraSignature: %+v", s)
	}
}

// An empty catalog is a valid document with no webhook.
func TestOpenAPIEmpty(t *testing.T) {
	t.Parallel()
	doc, err := eventtypes.Empty().OpenAPI(eventtypes.OpenAPIInfo{})
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil || d["info"].(map[string]any)["title"] != "Webhooks" {
		t.Fatalf("%v: %s", err, doc)
	}
	if hooks, ok := d["webhooks"].(map[string]any); !ok || len(hooks) != 0 {
		t.Fatalf("webhooks: %s", doc)
	}
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
