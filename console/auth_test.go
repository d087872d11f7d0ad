package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Without the token nothing is served: the API answers 401, a page
// redirects to /login, an action is refused and moves nothing.
func TestNoTokenNoData(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	for _, tc := range []struct {
		method, path string
		headers      []string
		want         int
	}{
		{"GET", "/api/endpoints", nil, http.StatusUnauthorized},
		{"GET", "/api/dead-letters", nil, http.StatusUnauthorized},
		{"GET", "/", nil, http.StatusSeeOther},
		{"GET", "/endpoints/shop", nil, http.StatusSeeOther},
		{"GET", "/api/endpoints", []string{"Authorization", "Bearer wrong-token-0123456789"}, http.StatusUnauthorized},
		{"GET", "/api/endpoints", []string{"Authorization", "Basic " + testToken}, http.StatusUnauthorized},
		{"POST", "/api/dead-letters/replay", nil, http.StatusUnauthorized},
		{"POST", "/dead-letters/replay", nil, http.StatusUnauthorized},
		{"GET", "/api/endpoints", []string{"Cookie", "console_session=forged"}, http.StatusUnauthorized},
	} {
		res, body := do(t, c, tc.method, b.url+tc.path, url.Values{"all": {"1"}}, tc.headers...)
		if res.StatusCode != tc.want {
			t.Errorf("%s %s %v: %d, want %d", tc.method, tc.path, tc.headers, res.StatusCode, tc.want)
		}
		if strings.Contains(body, "shop") || strings.Contains(body, deadShop1) {
			t.Errorf("%s %s: data in a refused answer: %q", tc.method, tc.path, body)
		}
		if tc.want == http.StatusSeeOther && res.Header.Get("Location") != "/login" {
			t.Errorf("%s %s: redirected to %q, want /login", tc.method, tc.path, res.Header.Get("Location"))
		}
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 3 {
		t.Fatalf("%d dead letters left, want 3: a refused replay moved rows", n)
	}
}

// A script's bearer token reads and acts without CSRF; GET /api/endpoints
// is an array of objects with a name.
func TestBearer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	res, body := do(t, c, "GET", b.url+"/api/endpoints", nil, bearer...)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/endpoints: %d %s", res.StatusCode, body)
	}
	var eps []map[string]any
	if err := json.Unmarshal([]byte(body), &eps); err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0]["name"] != "off" || eps[1]["name"] != "shop" {
		t.Fatalf("endpoints %v, want off and shop", eps)
	}
	if strings.Contains(body, "sekrit") || strings.Contains(body, "whsec_fixture") {
		t.Fatalf("an endpoint's URL query or secret in the API: %s", body)
	}
	res, body = do(t, c, "POST", b.url+"/api/endpoints/off/enable", url.Values{}, bearer...)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("bearer POST without CSRF: %d %s, want 200", res.StatusCode, body)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'off' AND enabled"); n != 1 {
		t.Fatal("off not enabled")
	}
}

// The login form sets an HttpOnly, SameSite=Strict session cookie (not
// Secure over plain HTTP); a POST with it needs the session's CSRF token.
func TestSessionAndCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	res, _ := do(t, c, "POST", b.url+"/login", url.Values{"token": {"wrong"}})
	if res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) > 0 {
		t.Fatalf("a wrong token: %d, cookies %v; want 401 and none", res.StatusCode, res.Cookies())
	}
	res, _ = do(t, c, "POST", b.url+"/login", url.Values{"token": {testToken}})
	cookies := res.Cookies()
	if res.StatusCode != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("login: %d, cookies %v", res.StatusCode, cookies)
	}
	if ck := cookies[0]; !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || strings.Contains(ck.Value, testToken) {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over HTTP, not the token", ck)
	}
	csrf := login(t, b, c)
	for _, tc := range []struct {
		form url.Values
		want int
	}{
		{url.Values{"id": {deadShop1}}, http.StatusForbidden},
		{url.Values{"id": {deadShop1}, "csrf": {"forged"}}, http.StatusForbidden},
		{url.Values{"id": {deadShop1}, "csrf": {csrf}}, http.StatusSeeOther},
	} {
		res, body := do(t, c, "POST", b.url+"/dead-letters/replay", tc.form)
		if res.StatusCode != tc.want {
			t.Fatalf("replay with %v: %d %s, want %d", tc.form, res.StatusCode, body, tc.want)
		}
		want := 1
		if tc.want == http.StatusForbidden {
			want = 0
		}
		if n := b.count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1", deadShop1); n != want {
			t.Fatalf("after %d: %d rows back in the outbox, want %d", res.StatusCode, n, want)
		}
	}
	// The API with the cookie needs it as well.
	if res, _ := do(t, c, "POST", b.url+"/api/endpoints/shop/disable", url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("cookie POST to the API without CSRF: %d, want 403", res.StatusCode)
	}
	if res, _ := do(t, c, "POST", b.url+"/api/endpoints/shop/disable", url.Values{}, "X-CSRF-Token", csrf); res.StatusCode != http.StatusOK {
		t.Fatalf("cookie POST to the API with X-CSRF-Token: %d, want 200", res.StatusCode)
	}
	if res, _ := do(t, c, "POST", b.url+"/logout", url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	if res, _ := do(t, c, "GET", b.url+"/api/endpoints", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: %d, want 401", res.StatusCode)
	}
	if strings.Contains(b.log.String(), testToken) {
		t.Fatal("the token reached the log")
	}
}

// After many wrong tokens from an address, the right one still gets in,
// by the form and by the bearer header; the wrong ones are refused with
// 429 once over the limit.
func TestLoginLimitNeverLocksOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	codes := map[int]int{}
	for range 30 {
		res, _ := do(t, c, "POST", b.url+"/login", url.Values{"token": {"guess"}})
		codes[res.StatusCode]++
	}
	if codes[http.StatusUnauthorized] < 10 || codes[http.StatusTooManyRequests] == 0 || len(codes) != 2 {
		t.Fatalf("30 wrong tokens answered %v: want 401 then 429", codes)
	}
	if res, _ := do(t, c, "POST", b.url+"/login", url.Values{"token": {testToken}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the right token after 30 guesses: %d, want 303", res.StatusCode)
	}
	if res, _ := do(t, c, "GET", b.url+"/api/endpoints", nil, bearer...); res.StatusCode != http.StatusOK {
		t.Fatalf("the right bearer token after 30 guesses: %d, want 200", res.StatusCode)
	}
	if res, _ := do(t, c, "GET", b.url+"/api/endpoints", nil, "Authorization", "Bearer wrong-token-0123456789"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a wrong bearer token after 30 guesses: %d, want 429", res.StatusCode)
	}
}

// Every answer carries a strict CSP; the static files need no token and
// come from the binary.
func TestHeadersAndStatic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	for _, p := range []string{"/login", "/static/console.js", "/static/console.css"} {
		res, body := do(t, c, "GET", b.url+p, nil)
		if res.StatusCode != http.StatusOK || body == "" {
			t.Fatalf("GET %s: %d", p, res.StatusCode)
		}
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "http") {
			t.Fatalf("GET %s: CSP %q", p, csp)
		}
	}
}
