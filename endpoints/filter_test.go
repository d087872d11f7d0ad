package endpoints_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/endpoints"
)

// A payload filter is checked by the database when it is set: what it
// refuses is a *FieldError on "filter" with its message, and nothing is
// written; Update sets it, "" removes it; Filters shows it as stored.
func TestPayloadFilter(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	for bad, says := range map[string]string{
		"$.amount ?? (@ > 1)":                              "syntax error",
		`$.a ? (@ like_regex "[")`:                         "invalid regular expression",
		"$.amount ? (@ > $min)":                            "a filter reads no variables",
		"$ ? (@ == \"" + strings.Repeat("x", 4100) + "\")": "over the limit of 4096",
	} {
		_, err := s.Create(ctx, endpoints.NewEndpoint{Name: "f", URL: "https://f.example.com/h", Secret: secret, Filter: bad})
		var fe *endpoints.FieldError
		if !errors.As(err, &fe) || fe.Field != "filter" || !strings.Contains(fe.Problem, says) {
			t.Errorf("filter %.40q: %v, want a FieldError on filter saying %q", bad, err, says)
		}
	}
	if n := b.db.Count(t, "SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("%d endpoints written with refused filters", n)
	}
	if _, err := s.Create(ctx, endpoints.NewEndpoint{Name: "f", URL: "https://f.example.com/h", Secret: secret,
		Filter: " $.amount ? (@ >= 100) "}); err != nil {
		t.Fatal(err)
	}
	add(t, s, "plain")
	got, err := s.Filters(ctx)
	if err != nil || len(got) != 1 || got["f"] != `$."amount"?(@ >= 100)` {
		t.Fatalf("Filters: %v, %v", got, err)
	}
	bad := "$.x ?"
	var fe *endpoints.FieldError
	if _, err := s.Update(ctx, "f", endpoints.Update{Filter: &bad}); !errors.As(err, &fe) || fe.Field != "filter" {
		t.Fatalf("update to a bad filter: %v", err)
	}
	none := ""
	if _, err := s.Update(ctx, "f", endpoints.Update{Filter: &none}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Filters(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Filters after removing it: %v, %v", got, err)
	}
}
