package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// catalogData lists two types, one with a schema and an example, one
// deprecated whose description holds markup; strict on.
func catalogData(t *testing.T, b bundle) {
	t.Helper()
	b.exec(t, `INSERT INTO webhook_event_types (name, description, schema, example, deprecated) VALUES
		('invoice.paid', 'An invoice was paid.', '{"type": "object", "required": ["amount"]}', '{"amount": 500}', false),
		('invoice.old', '<b>gone</b> soon', NULL, NULL, true)`)
	b.exec(t, `UPDATE webhook_event_catalog SET strict = true`)
}

// GET /api/event-types is the catalog and strict mode; the page lists the
// types with their schemas and examples, escaped.
func TestEventTypesPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	res, body := do(t, c, "GET", b.url+"/event-types", nil, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "The catalog lists no type") {
		t.Fatalf("an empty catalog: %d %s", res.StatusCode, body)
	}
	catalogData(t, b)
	res, body = do(t, c, "GET", b.url+"/api/event-types", nil, bearer...)
	var got struct {
		Strict bool `json:"strict"`
		Types  []struct {
			Name       string          `json:"name"`
			Schema     json.RawMessage `json:"schema"`
			Example    json.RawMessage `json:"example"`
			Deprecated bool            `json:"deprecated"`
		} `json:"types"`
	}
	if err := json.Unmarshal([]byte(body), &got); res.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /api/event-types: %d %v %s", res.StatusCode, err, body)
	}
	if !got.Strict || len(got.Types) != 2 || got.Types[0].Name != "invoice.old" || !got.Types[0].Deprecated ||
		got.Types[1].Name != "invoice.paid" || !strings.Contains(string(got.Types[1].Schema), `"required"`) {
		t.Fatalf("GET /api/event-types: %s", body)
	}
	res, body = do(t, c, "GET", b.url+"/event-types", nil, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-type="invoice.paid"`) || !strings.Contains(body, "<b>on</b>") ||
		!strings.Contains(body, "&#34;amount&#34;: 500") || !strings.Contains(body, "&lt;b&gt;gone&lt;/b&gt; soon") ||
		!strings.Contains(body, `class="deprecated"`) {
		t.Fatalf("the page: %d %s", res.StatusCode, body)
	}
	if res, _ = do(t, c, "GET", b.url+"/api/event-types", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", res.StatusCode)
	}
}

// A real browser reaches the catalog from the navigation and opens a
// type's schema.
func TestBrowserEventTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	catalogData(t, b)
	ctx := browser(t)
	var schema, strict string
	err := chromedp.Run(ctx,
		chromedp.Navigate(b.url+"/"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", testToken, chromedp.ByID),
		clickToPage("#login", chromedp.ByID),
		chromedp.WaitVisible(`nav a[href="/event-types"]`, chromedp.ByQuery),
		clickToPage(`nav a[href="/event-types"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr[data-type="invoice.paid"]`, chromedp.ByQuery),
		chromedp.Text("#strict", &strict, chromedp.ByID),
		chromedp.Click(`tr[data-type="invoice.paid"] summary`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr[data-type="invoice.paid"] pre`, chromedp.ByQuery),
		chromedp.Text(`tr[data-type="invoice.paid"] pre`, &schema, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("event types page: %v", err)
	}
	if !strings.Contains(strict, "Strict mode: on") || !strings.Contains(schema, `"required": [`) {
		t.Fatalf("strict %q, schema %q", strict, schema)
	}
}
