package schema_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/idna"

	"github.com/fluxora/webhook-worker/hostaddr"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/sender"
)

// The database refuses exactly the endpoint URLs the worker refuses, with
// the same reason, so that a plain SQL insert cannot add an endpoint the
// worker would not deliver to.
func TestURLRulesMatchTheWorkers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, raw := range []string{
		"https://example.com", "https://example.com/hooks/in?tenant=1", "HTTPS://Example.COM:8443/x",
		"https://203.0.113.7/hook", "http://localhost", "http://LOCALHOST:9000/hook", "http://127.0.0.1:8080",
		"http://127.1.2.3/hook", "http://[::1]/", "http://[::1]:8080/hook", "http://[::ffff:127.0.0.1]/",
		"https://example.com:/", "https://[2001:db8::1]:8443/",
		"", "http://example.com", "http://10.0.0.1/", "http://localhost.example.com/", "http://0.0.0.0/",
		"ftp://example.com/", "ws://localhost/", "file:///etc/passwd", "https:///path", "https://:443/",
		"https://example.com:0/", "https://example.com:65536/", "https://example.com:abc/", "/relative/path",
		"example.com/hook", "//example.com/hook", "https:example.com", "http://user:pass@localhost/",
		"https://user@example.com/", "https://@example.com/", "https://example.com/#frag", "https://example.com/#",
		"https://exa mple.com/", "https://example.com/a b", "https://example.com/\x7f", "https://example.com/\n",
		"pass:word@example.com", "https://example.com:99999999999/",
		// Hosts as hostaddr reads them.
		"http://127.000.000.001/", "http://0177.0.0.1/", "http://0x7f.1:8080/x", "http://2130706433/", "http://127.1/",
		"http://0x7F000001/", "http://127.0.0.1./", "http://[::ffff:7f00:1]/", "https://2130706433/", "https://10.1/",
		"http://10.1/", "http://012.0.0.1/", "http://167772161/", "https://example.123/", "https://1.2.3.256/",
		"https://1.2.3.4.5/", "https://08.0.0.1/", "https://0x7g.1/", "https://a..b/", "https://.a/", "https://a.b./",
		"https://4294967296/", "https://99999999999999999999999/", "http://[fe80::1%25lo]/", "https://[1.2.3.4]/",
		"https://[example]/", "http://127.0.0.%31/", "https://exa%41mple.com/", "https://1.2.3.example/",
		"http://[]/", "https://0x/", "http://0/",
		// Hosts not in ASCII, read as the HTTP client maps them (IDNA).
		"http://ｌｏｃａｌｈｏｓｔ:8080/", "http://ＬＯＣＡＬＨＯＳＴ/", "https://１０．０．０．１：４４３/",
		"https://１０．０．０．１:8443/x", "http://127。0。0。1/", "http://\u00ad/", "https://\u00ad.example/",
	} {
		agree(t, db, raw)
	}
	// Every host of the shared table, as an https and an http URL.
	for _, c := range hostaddr.HostCases {
		agree(t, db, "https://"+c.Host+"/")
		agree(t, db, "http://"+c.Host+":8080/x")
	}
}

// agree fails t unless the worker and the database both accept raw, or
// both refuse it with the same text.
func agree(t *testing.T, db *testdb.DB, raw string) {
	t.Helper()
	_, goErr := sender.ValidateURL(raw)
	var problem *string
	if err := db.Pool.QueryRow(context.Background(), "SELECT webhook_url_problem($1)", raw).Scan(&problem); err != nil {
		t.Fatal(err)
	}
	switch {
	case goErr == nil && problem != nil:
		t.Errorf("%q: the worker accepts it, the database refuses it: %s", raw, *problem)
	case goErr != nil && problem == nil:
		t.Errorf("%q: the database accepts it, the worker refuses it: %v", raw, goErr)
	case goErr != nil && goErr.Error() != *problem:
		t.Errorf("%q: the worker says %q, the database %q", raw, goErr, *problem)
	}
}

// A plain SQL insert or update of a bad endpoint fails with a message that
// names the column and the rule, and never prints the secret.
func TestEndpointRowsAreCheckedBySQL(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, url, secret string
		events            []string
		want              string
	}{
		{"plain-http", "http://hooks.example.com/", "whsec_sekrit", nil, `webhook_endpoints.url of endpoint "plain-http": must be https`},
		{"creds", "https://u:p@hooks.example.com/", "whsec_sekrit", nil, "must not contain credentials"},
		{"bad name!", "https://hooks.example.com/", "whsec_sekrit", nil, "webhook_endpoints.name"},
		{"nosecret", "https://hooks.example.com/", "", nil, "webhook_endpoints.secret"},
		{"badtypes", "https://hooks.example.com/", "whsec_sekrit", []string{"a", "b\nc"}, "webhook_endpoints.event_types"},
	} {
		if tc.events == nil {
			tc.events = []string{}
		}
		_, err := db.Pool.Exec(ctx, "INSERT INTO webhook_endpoints (name, url, secret, event_types) VALUES ($1, $2, $3, $4)",
			tc.name, tc.url, tc.secret, tc.events)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := db.Pool.Exec(ctx, "INSERT INTO webhook_endpoints (name, url, secret) VALUES ('ok', 'https://hooks.example.com/', 'whsec_sekrit')"); err != nil {
		t.Fatal(err)
	}
	_, err := db.Pool.Exec(ctx, "UPDATE webhook_endpoints SET url = 'http://10.1.2.3/' WHERE name = 'ok'")
	if err == nil || !strings.Contains(err.Error(), "must be https") {
		t.Fatalf("update to a bad URL: %v", err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE url = 'https://hooks.example.com/'"); n != 1 {
		t.Fatalf("%d endpoints", n)
	}
}

// The database reads a host as package hostaddr does, on its whole table
// of cases: the address of any spelling of an IP, a name, or no host.
func TestHostRulesMatchTheWorkers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, c := range hostaddr.HostCases {
		var addr, problem, name *string
		if err := db.Pool.QueryRow(context.Background(), "SELECT host(addr), problem, name FROM webhook_host_parse($1)", c.Host).Scan(&addr, &problem, &name); err != nil {
			t.Fatal(err)
		}
		h, goErr := hostaddr.Canonical(c.Host)
		a, isIP := h.Addr, h.Addr.IsValid()
		switch {
		case goErr == nil && !isIP && (name == nil || !strings.EqualFold(toASCII(t, *name), h.Name)):
			t.Errorf("%q: the worker reads the name %q, the database %v", c.Host, h.Name, deref(name))
		case goErr != nil && (problem == nil || *problem != goErr.Error()):
			t.Errorf("%q: the worker says %q, the database %v", c.Host, goErr, deref(problem))
		case goErr == nil && problem != nil:
			t.Errorf("%q: the worker reads it, the database says %q", c.Host, *problem)
		case isIP && (addr == nil || netip.MustParseAddr(*addr) != a):
			t.Errorf("%q: the worker reads %s, the database %v", c.Host, a, deref(addr))
		case goErr == nil && !isIP && addr != nil:
			t.Errorf("%q: a name to the worker, the address %s to the database", c.Host, *addr)
		}
	}
}

// toASCII is name, as webhook_host_parse gives it (not in ASCII when the
// host was not), in the ASCII form the HTTP client sends.
func toASCII(t *testing.T, name string) string {
	a, err := idna.Lookup.ToASCII(name)
	if err != nil {
		t.Errorf("%q: %v", name, err)
	}
	return a
}

// The database maps each character of a host as IDNA (UTS #46, the
// profile Go's HTTP client uses) does wherever IDNA maps it to ASCII, and
// never maps to ASCII a character IDNA does not: so no host is an address
// to one and a name to the other. Every code point is tried: those IDNA
// maps to ASCII (or drops), and those NFKC or the locale's lower case
// bring to ASCII. Each stands after an "a", as inside a label; the
// bidirectional rule, which judges whole labels, is left out.
func TestHostMappingMatchesIDNA(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	p := idna.New(idna.MapForLookup(), idna.Transitional(false))
	want := func(r rune) string {
		out, err := p.ToASCII("a" + string(r))
		switch {
		case err != nil:
			return "refused"
		case strings.Contains(out, "xn--"):
			return "not ASCII"
		}
		return "= " + out[1:]
	}
	var ascii []int32
	for r := rune(0x80); r <= 0x10ffff; r++ {
		if (r < 0xd800 || r > 0xdfff) && strings.HasPrefix(want(r), "=") {
			ascii = append(ascii, r)
		}
	}
	rows, err := db.Pool.Query(context.Background(), `
		WITH candidate AS (
		    SELECT r FROM unnest($1::int[]) r
		    UNION
		    SELECT r FROM generate_series(128, 1114111) r
		    WHERE r NOT BETWEEN 55296 AND 57343 AND lower(normalize(chr(r), NFKC)) ~ '[\x01-\x7f]'
		)
		SELECT r, m.host, m.problem FROM candidate, webhook_host_map('a' || chr(r)) m ORDER BY r`, ascii)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var r int32
		var host, problem *string
		if err := rows.Scan(&r, &host, &problem); err != nil {
			t.Fatal(err)
		}
		got := "refused"
		switch {
		case problem == nil && strings.ContainsFunc(*host, func(c rune) bool { return c >= 0x80 }):
			got = "not ASCII"
		case problem == nil:
			got = "= " + (*host)[1:]
		}
		n++
		if w := want(r); got != w && (strings.HasPrefix(w, "=") || strings.HasPrefix(got, "=")) {
			t.Errorf("%U %q: IDNA %s, the database %s", r, string(r), w, got)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < len(ascii) {
		t.Fatalf("compared %d code points, fewer than the %d IDNA maps to ASCII", n, len(ascii))
	}
}
