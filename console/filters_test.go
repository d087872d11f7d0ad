package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// An endpoint's payload filter shows on its page (whole), on the overview
// (marked, the filter in its title) and in /api/endpoints.
func TestEndpointShowsPayloadFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(context.Background(),
		`UPDATE webhook_endpoints SET payload_filter = '$.customer.id ? (@ == "c_<42>")' WHERE name = 'shop'`); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	res, body := do(t, c, "GET", b.url+"/endpoints/shop", nil, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `payload filter <code>$.&#34;customer&#34;.&#34;id&#34;?(@ == &#34;c_&lt;42&gt;&#34;)</code>`) {
		t.Fatalf("endpoint page: %d\n%s", res.StatusCode, body)
	}
	res, body = do(t, c, "GET", b.url+"/", nil, bearer...)
	if res.StatusCode != http.StatusOK || strings.Count(body, ">filtered</span>") != 1 || !strings.Contains(body, `c_&lt;42&gt;`) {
		t.Fatalf("overview: %d\n%s", res.StatusCode, body)
	}
	_, body = do(t, c, "GET", b.url+"/api/endpoints", nil, bearer...)
	if !strings.Contains(body, `"filter":"$.\"customer\".\"id\"?(@ == \"c_\u003c42\u003e\")"`) {
		t.Fatalf("/api/endpoints: %s", body)
	}
}
