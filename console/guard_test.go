package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/console"
)

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Two wrong guesses a second from one address are slowed (429 once over
// the limit) while the right token, tried after each, logs in every time.
func TestLoginLimitSlowsGuessesNotTheOperator(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	b := setupConfig(t, func(c *console.Config) { c.Now = clk.now })
	c := client(t)
	codes := map[int]int{}
	for i := range 24 {
		res, _ := do(t, c, "POST", b.url+"/login", url.Values{"token": {fmt.Sprintf("guess-%d", i)}})
		codes[res.StatusCode]++
		if i < 10 && res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: %d, want 401 (within the burst)", i, res.StatusCode)
		}
		if res, _ := do(t, client(t), "POST", b.url+"/login", url.Values{"token": {testToken}}); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("the right token after wrong guess %d: %d, want 303", i, res.StatusCode)
		}
		clk.add(500 * time.Millisecond)
	}
	if codes[http.StatusTooManyRequests] < 8 || codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != 24 {
		t.Fatalf("24 wrong guesses at 2 a second answered %v: want most of those past the burst slowed (429)", codes)
	}
}

// serve sends r straight to the console (no connection: the address is
// made up) and returns the status.
func serve(b bundle, method, path, remote string, form url.Values, headers ...string) int {
	r := httptest.NewRequest(method, "http://console.test"+path, strings.NewReader(form.Encode()))
	r.RemoteAddr = remote
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	b.srv.ServeHTTP(w, r)
	return w.Code
}

// A flood of wrong guesses from more addresses than the limiter remembers
// does not free an address it is throttling; an IPv6 client's /64 counts
// as one address.
func TestLoginLimitFloodKeepsThrottled(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	b := setupConfig(t, func(c *console.Config) { c.Now = clk.now; c.Hosts = []string{"console.test"} })
	wrong := []string{"Authorization", "Bearer wrong-token-0123456789"}
	const throttled = "192.0.2.1:4000"
	for i := range 10 {
		if code := serve(b, "GET", "/api/endpoints", throttled, nil, wrong...); code != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: %d, want 401", i, code)
		}
	}
	if code := serve(b, "GET", "/api/endpoints", throttled, nil, wrong...); code != http.StatusTooManyRequests {
		t.Fatalf("the 11th wrong guess: %d, want 429", code)
	}
	for i := range 25_000 {
		serve(b, "GET", "/api/endpoints", fmt.Sprintf("10.%d.%d.%d:4000", i>>16, i>>8&0xff, i&0xff), nil, wrong...)
	}
	// Three seconds on: the overall limit has room again, the throttled
	// address half a guess (one comes every six seconds).
	clk.add(3 * time.Second)
	if code := serve(b, "GET", "/api/endpoints", throttled, nil, wrong...); code != http.StatusTooManyRequests {
		t.Fatalf("the throttled address after a flood of 25,000 others: %d, want 429 still", code)
	}
	if code := serve(b, "GET", "/api/endpoints", throttled, nil, bearer...); code != http.StatusOK {
		t.Fatalf("the right token from the throttled address: %d, want 200", code)
	}
	clk.add(2 * time.Minute) // every limit has room again
	for i := range 10 {
		if code := serve(b, "GET", "/api/endpoints", fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1), nil, wrong...); code != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d from 2001:db8:1:2::/64: %d, want 401", i, code)
		}
	}
	if code := serve(b, "GET", "/api/endpoints", "[2001:db8:1:2:ffff::1]:4000", nil, wrong...); code != http.StatusTooManyRequests {
		t.Fatalf("an 11th address of the same /64: %d, want 429", code)
	}
}

// /login reads form-encoded bodies only, at most 16 KiB: a multipart one
// is refused with 415, a larger one with 413, whether its length is
// declared or it comes chunked; the other POSTs stop at 1 MiB.
func TestLoginBodyLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("upload", "big.bin")
	_, _ = fw.Write(bytes.Repeat([]byte("x"), 1<<20))
	_ = mw.WriteField("token", "guess")
	_ = mw.Close()
	big := "token=" + strings.Repeat("x", 17<<10)
	for _, tc := range []struct {
		name, path, ctype string
		body              io.Reader
		want              int
	}{
		{"multipart", "/login", mw.FormDataContentType(), bytes.NewReader(mp.Bytes()), http.StatusUnsupportedMediaType},
		{"json", "/login", "application/json", strings.NewReader(`{"token": "guess"}`), http.StatusUnsupportedMediaType},
		{"17 KiB declared", "/login", "application/x-www-form-urlencoded", strings.NewReader(big), http.StatusRequestEntityTooLarge},
		{"17 KiB chunked", "/login", "application/x-www-form-urlencoded", io.MultiReader(strings.NewReader(big)), http.StatusRequestEntityTooLarge},
		{"a form", "/login", "application/x-www-form-urlencoded", strings.NewReader("token=guess"), http.StatusUnauthorized},
		{"2 MiB chunked action", "/api/dead-letters/purge", "application/x-www-form-urlencoded",
			io.MultiReader(strings.NewReader("a=" + strings.Repeat("x", 2<<20))), http.StatusRequestEntityTooLarge},
	} {
		req, _ := http.NewRequest("POST", b.url+tc.path, tc.body)
		req.Header.Set("Content-Type", tc.ctype)
		if tc.path != "/login" {
			req.Header.Set(bearer[0], bearer[1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, res.StatusCode, tc.want)
		}
	}
}

// The console answers only for the hosts it serves (its address, localhost
// on loopback, Config.Hosts; else 421), and refuses cross-origin POSTs by
// Origin and Sec-Fetch-Site (403), /login included.
func TestHostAndOrigin(t *testing.T) {
	t.Parallel()
	b := setupConfig(t, func(c *console.Config) { c.Hosts = []string{"console.example.com", "proxy.example.com:8443"} })
	u, _ := url.Parse(b.url)
	_, port, _ := strings.Cut(u.Host, ":")
	for _, tc := range []struct {
		host string
		want int
	}{
		{u.Host, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"console.example.com", http.StatusOK},
		{"CONSOLE.example.com.:" + port, http.StatusOK},
		{"proxy.example.com:8443", http.StatusOK},
		{"proxy.example.com:9000", http.StatusMisdirectedRequest},
		{"rebound.attacker.example:" + port, http.StatusMisdirectedRequest},
		{"127.0.0.2:" + port, http.StatusMisdirectedRequest},
	} {
		req, _ := http.NewRequest("GET", b.url+"/login", nil)
		req.Host = tc.host
		res, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("Host %q: %d, want %d", tc.host, res.StatusCode, tc.want)
		}
	}
	self := "http://" + u.Host
	for _, tc := range []struct {
		headers []string
		want    int
	}{
		{nil, http.StatusSeeOther},
		{[]string{"Origin", self, "Sec-Fetch-Site", "same-origin"}, http.StatusSeeOther},
		{[]string{"Origin", "null", "Sec-Fetch-Site", "same-origin"}, http.StatusSeeOther}, // a form under no-referrer
		{[]string{"Sec-Fetch-Site", "none"}, http.StatusSeeOther},
		{[]string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{[]string{"Origin", "https://" + u.Host}, http.StatusForbidden},
		{[]string{"Origin", "null"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{[]string{"Origin", self, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
	} {
		if res, _ := do(t, client(t), "POST", b.url+"/login", url.Values{"token": {testToken}}, tc.headers...); res.StatusCode != tc.want {
			t.Errorf("login with %v: %d, want %d", tc.headers, res.StatusCode, tc.want)
		}
	}
	res, _ := do(t, client(t), "POST", b.url+"/api/endpoints/off/enable", url.Values{}, append([]string{"Origin", "http://evil.example"}, bearer...)...)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-origin bearer POST: %d, want 403", res.StatusCode)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'off' AND enabled"); n != 0 {
		t.Fatal("a refused POST enabled off")
	}
}

// Credentials among an event's own headers are masked on the delivery page
// and in the API, like the signatures; other headers are shown.
func TestSecretHeadersMasked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	secrets := map[string]string{"Authorization": "Bearer hdr-secret-1", "Cookie": "sid=hdr-secret-2", "X-Api-Key": "hdr-secret-3",
		"X-Auth-Token": "hdr-secret-4", "X-Client-Secret": "hdr-secret-5", "X-Password": "hdr-secret-6"}
	headers, _ := json.Marshal(map[string]string{"Authorization": secrets["Authorization"], "Cookie": secrets["Cookie"],
		"X-Api-Key": secrets["X-Api-Key"], "X-Auth-Token": secrets["X-Auth-Token"], "X-Client-Secret": secrets["X-Client-Secret"],
		"X-Password": secrets["X-Password"], "traceparent": "00-abc-01"})
	b.exec(t, `UPDATE webhook_outbox SET headers = $1 WHERE delivery_id = $2`, string(headers), event)
	c := client(t)
	for _, path := range []string{"/api/deliveries/" + event, "/deliveries?id=" + event} {
		res, body := do(t, c, "GET", b.url+path, nil, bearer...)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, "00-abc-01") || !strings.Contains(body, "X-Api-Key") {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
		}
		if strings.Contains(body, "hdr-secret") {
			t.Fatalf("GET %s shows a credential: %s", path, body)
		}
	}
}

// /static/ serves its files and nothing else: no listing, no dot segment
// however spelled.
func TestStaticFilesOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"/static/", "/static/%2e%2e/", "/static/%2E%2E/", "/static/%2e%2e/templates/login.html",
		"/static/.%2e/", "/static/%2e/console.js", "/static/..%2ftemplates%2flogin.html", "/static/%2e%2e%2f", "/static/nope.js"} {
		req, err := http.NewRequest("GET", b.url+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
		if strings.Contains(string(body), "templates") || strings.Contains(string(body), "console.css") {
			t.Errorf("GET %s lists files: %s", p, body)
		}
	}
}
