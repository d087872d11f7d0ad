package eventtypes_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/eventtypes"
	"github.com/fluxora/webhook-worker/webhook"
)

const invoiceSchema = `{
	"type": "object",
	"required": ["id", "amount"],
	"properties": {
		"id": {"type": "string", "pattern": "^in_[a-z0-9]+$"},
		"amount": {"type": "integer", "minimum": 1},
		"email": {"type": "string", "format": "email"},
		"currency": {"enum": ["EUR", "USD"]}
	},
	"additionalProperties": false
}`

func catalog(t *testing.T, strict bool, types ...webhook.EventType) *eventtypes.Catalog {
	t.Helper()
	return eventtypes.New(types, strict, 7)
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, problem string }{
		{"invoice.paid", ""},
		{"a b é", ""},
		{strings.Repeat("x", 255), ""},
		{"", "must be 1-255 bytes"},
		{strings.Repeat("x", 256), "must be 1-255 bytes"},
		{"a\nb", "must be 1-255 bytes"},
		{"invoice.*", `may not hold "*"`},
		{"a*b", `may not hold "*"`},
		{"fluxora.endpoint.disabled", "the worker's own"},
	} {
		err := eventtypes.CheckName(tc.name)
		if tc.problem == "" && err != nil || tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)) {
			t.Errorf("CheckName(%.20q) = %v, want %q", tc.name, err, tc.problem)
		}
	}
}

// Strict mode refuses a type the catalog does not list, but the worker's
// own; off, every type is accepted.
func TestProblem(t *testing.T) {
	t.Parallel()
	on := catalog(t, true, webhook.EventType{Name: "invoice.paid"})
	off := catalog(t, false, webhook.EventType{Name: "invoice.paid"})
	for _, typ := range []string{"invoice.paid", "fluxora.endpoint.disabled", "fluxora.anything"} {
		if p := on.Problem(typ); p != "" {
			t.Errorf("strict, %s: %q", typ, p)
		}
	}
	if p := on.Problem("invoice.payed"); p != "unknown event type invoice.payed: the event catalog is strict" {
		t.Errorf("strict, unknown: %q", p)
	}
	if err := on.Check("invoice.payed", []byte(`{}`)); !errors.Is(err, eventtypes.ErrUnknownType) {
		t.Errorf("Check: %v, want ErrUnknownType", err)
	}
	if p := off.Problem("invoice.payed"); p != "" {
		t.Errorf("not strict: %q", p)
	}
}

// A payload is checked against its type's schema; the error names the
// places and rules, never a value of the payload.
func TestValidate(t *testing.T) {
	t.Parallel()
	c := catalog(t, false, webhook.EventType{Name: "invoice.paid", Schema: json.RawMessage(invoiceSchema)},
		webhook.EventType{Name: "note"})
	for _, tc := range []struct {
		typ, payload string
		want         []string // in the error; none: valid
	}{
		{"invoice.paid", `{"id": "in_1", "amount": 5}`, nil},
		{"invoice.paid", `{"id": "in_1", "amount": 5, "email": "a@example.com", "currency": "EUR"}`, nil},
		{"note", `[1, "anything"]`, nil},
		{"unlisted", `"anything"`, nil},
		{"invoice.paid", `{"id": "in_1"}`, []string{`payload does not match the schema of invoice.paid: /: missing property 'amount'`}},
		{"invoice.paid", `{"id": "in_1", "amount": "5"}`, []string{"/amount: got string, want integer"}},
		{"invoice.paid", `{"id": "SECRET-TOKEN-1", "amount": 5}`, []string{`/id: does not match pattern "^in_[a-z0-9]+$"`}},
		{"invoice.paid", `{"id": "in_1", "amount": -987654}`, []string{"/amount: minimum: want 1"}},
		{"invoice.paid", `{"id": "in_1", "amount": 5, "email": "SECRET-not-an-email"}`, []string{"/email: not a valid email"}},
		{"invoice.paid", `{"id": "in_1", "amount": 5, "currency": "SECRET-GBP"}`, []string{"/currency: value must be one of"}},
		{"invoice.paid", `{"id": "in_1", "amount": 5, "extra": 1}`, []string{"/: additional properties 'extra' not allowed"}},
		{"invoice.paid", `{"id": 1, "amount": "x", "email": 2, "currency": 3, "more": 4}`, []string{"(and ", " more)"}},
		{"invoice.paid", `[]`, []string{"/: got array, want object"}},
	} {
		err := c.Validate(tc.typ, []byte(tc.payload))
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s %s: %v", tc.typ, tc.payload, err)
			}
			continue
		}
		var pe *eventtypes.PayloadError
		if !errors.As(err, &pe) {
			t.Errorf("%s %s: %v, want a *PayloadError", tc.typ, tc.payload, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: %q, want it to hold %q", tc.typ, tc.payload, err, w)
			}
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "987654") {
			t.Errorf("%s: the error quotes the payload: %q", tc.payload, err)
		}
	}
}

// A schema may not reach outside itself: a $ref to a file or a URL does
// not compile (nothing is read), and its type's payloads are refused with
// ErrSchemaBroken; the meta-schemas and refs within the document work.
func TestSchemaRefsStayInside(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{"file:///etc/passwd", "http://127.0.0.1:1/x.json", "other.json"} {
		doc := `{"$ref": "` + ref + `"}`
		if _, err := eventtypes.Compile("t", []byte(doc)); err == nil || strings.Contains(err.Error(), "root:") {
			t.Errorf("%s: compiled (%v)", ref, err)
		}
		c := catalog(t, false, webhook.EventType{Name: "t", Schema: json.RawMessage(doc)})
		if err := c.Validate("t", []byte(`{}`)); !errors.Is(err, eventtypes.ErrSchemaBroken) {
			t.Errorf("%s: Validate = %v, want ErrSchemaBroken", ref, err)
		}
		if len(c.Broken()) != 1 {
			t.Errorf("%s: Broken = %v", ref, c.Broken())
		}
	}
	inside := `{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"n": {"type": "integer"}},
		"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}}`
	c := catalog(t, false, webhook.EventType{Name: "t", Schema: json.RawMessage(inside)})
	if err := c.Validate("t", []byte(`{"n": 1}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate("t", []byte(`{"n": "x"}`)); err == nil {
		t.Fatal("a $ref within the document was not applied")
	}
	draft7 := `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}`
	if _, err := eventtypes.Compile("t", []byte(draft7)); err != nil {
		t.Fatalf("draft-07 meta-schema: %v", err)
	}
}

func TestCheckSubscription(t *testing.T) {
	t.Parallel()
	c := catalog(t, false, webhook.EventType{Name: "invoice.paid"}, webhook.EventType{Name: "invoice.voided"},
		webhook.EventType{Name: "customer.created"})
	for _, tc := range []struct {
		subs []string
		want string // "" accepted
	}{
		{[]string{}, ""},
		{[]string{"invoice.paid", "customer.created"}, ""},
		{[]string{"invoice.*", "inv*", "customer.*"}, ""},
		{[]string{"fluxora.endpoint.disabled", "fluxora.*", "fluxora.endpoint.*"}, ""},
		{[]string{"invoice.payed"}, "unknown event type invoice.payed (did you mean invoice.paid?)"},
		{[]string{"invoice.paid", "customer.craeted"}, "unknown event type customer.craeted (did you mean customer.created?)"},
		{[]string{"shipment.sent"}, "unknown event type shipment.sent"},
		{[]string{"invoce.*"}, "pattern invoce.* matches no event type of the catalog (did you mean invoice.*?)"},
		{[]string{"invoice.paid.*"}, "pattern invoice.paid.* matches no event type of the catalog"},
		{[]string{"refund.*"}, "pattern refund.* matches no event type of the catalog"},
	} {
		err := c.CheckSubscription(tc.subs)
		if got := errText(err); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.subs, got, tc.want)
		}
	}
	if err := eventtypes.Empty().CheckSubscription([]string{"anything", "x.*"}); err != nil {
		t.Errorf("an empty catalog checks nothing: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
