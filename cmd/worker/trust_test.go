package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/testtls"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// connectProxy is an HTTP CONNECT proxy on loopback that tunnels only to
// loopback IP literals and records each tunnel's target.
type connectProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	tunnels []string
	wg      sync.WaitGroup
}

func newConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{ln: ln}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *connectProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *connectProxy) targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tunnels...)
}

func (p *connectProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.serve(c) }()
	}
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	host, _, _ := net.SplitHostPort(req.Host)
	if req.Method != http.MethodConnect || (host != "127.0.0.1" && host != "::1") {
		_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.tunnels = append(p.tunnels, req.Host)
	p.mu.Unlock()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// mtlsConsumer is a consumer over TLS (a server certificate of ca) that
// requires a client certificate of ca, and records the client's name.
func mtlsConsumer(t *testing.T, ca *testtls.CA, secret string) (*consumer, func() []string) {
	t.Helper()
	c := &consumer{arrived: make(chan delivery, 100), secret: secret}
	var mu sync.Mutex
	var names []string
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		names = append(names, r.TLS.PeerCertificates[0].Subject.CommonName)
		mu.Unlock()
		c.serve(w, r)
	}))
	c.srv.Listener.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.srv.Listener = ln
	c.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	c.srv.Config.ErrorLog = nil
	c.srv.StartTLS()
	t.Cleanup(c.srv.Close)
	return c, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), names...) }
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Deliveries go through WEBHOOK_EGRESS_PROXY by CONNECT, verified by
// WEBHOOK_CA_FILE alone (WEBHOOK_CA_ONLY), presenting the endpoint's client
// certificate (its key stored sealed); a certificate the consumer does not
// trust fails as the consumer's refusal, named so, and is retried. The
// certificate's expiry is in status and in the days-left metric; its key
// is in no output.
func TestMutualTLSThroughAProxy(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	dir := t.TempDir()
	ca, stranger := testtls.NewCA(t, "partner CA"), testtls.NewCA(t, "unknown CA")
	good, bad := ca.Client(t, "fluxora-billing", 30*24*time.Hour), stranger.Client(t, "fluxora-audit", 90*24*time.Hour)
	c, names := mtlsConsumer(t, ca, cliSecret)
	proxy := newConnectProxy(t)

	endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", c.srv.URL+"/billing", "--secret", cliSecret,
		"--client-cert-file", writeFile(t, dir, "good.pem", good.CertPEM), "--client-key-file", writeFile(t, dir, "good.key", good.KeyPEM))
	endpointsCLI(t, db, exitOK, "add", "--name", "audit", "--url", c.srv.URL+"/audit", "--secret", cliSecret)
	out, _ := endpointsCLI(t, db, exitOK, "update", "audit",
		"--client-cert-file", writeFile(t, dir, "bad.pem", bad.CertPEM), "--client-key-file", writeFile(t, dir, "bad.key", bad.KeyPEM))
	if !strings.Contains(out, "client certificate until "+bad.NotAfter.UTC().Format("2006-01-02")) {
		t.Fatalf("update: %s", out)
	}
	enqueue(t, db, "invoice.paid", `{"n": 1}`, "billing")
	enqueue(t, db, "invoice.paid", `{"n": 2}`, "audit")

	w := startInProcess(t, endpointsOnly(db, map[string]string{
		"WEBHOOK_EGRESS_PROXY": proxy.URL(), "WEBHOOK_CA_FILE": writeFile(t, dir, "ca.pem", ca.PEM), "WEBHOOK_CA_ONLY": "true",
		"WEBHOOK_BACKOFF_BASE_MS": "200", "WEBHOOK_BACKOFF_MAX_MS": "1000",
	}))
	waitfor.True(t, 20*time.Second, "billing delivered", func() bool { return len(c.deliveries()) >= 1 })
	if d := c.deliveries()[0]; !d.SignatureOK || d.Endpoint != "billing" {
		t.Fatalf("delivery %+v", d)
	}
	if n := names(); len(n) != 1 || n[0] != "fluxora-billing" {
		t.Fatalf("client certificates seen by the consumer: %v", n)
	}
	if got := proxy.targets(); len(got) == 0 || got[0] != c.srv.Listener.Addr().String() {
		t.Fatalf("tunnels through the proxy %v, want %s", got, c.srv.Listener.Addr())
	}

	var lastErr string
	waitfor.True(t, 20*time.Second, "audit's refusal recorded", func() bool {
		_ = db.Pool.QueryRow(context.Background(), `SELECT coalesce(last_error, '') FROM webhook_endpoints WHERE name = 'audit'`).Scan(&lastErr)
		return lastErr != ""
	})
	// TLS 1.3: the consumer checks the certificate after the handshake, so
	// its refusal reaches the worker as the alert, or as the connection it
	// closed under the request being written; both say what to check.
	if !strings.Contains(lastErr, "the consumer refused the TLS handshake (check the endpoint's client certificate)") ||
		!strings.Contains(lastErr, "remote error: tls:") && !strings.Contains(lastErr, "it closed the connection after asking for one") {
		t.Fatalf("audit's last error %q", lastErr)
	}
	t.Logf("audit's last error: %s", lastErr)
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter`); n != 0 {
		t.Fatalf("%d dead letters: a refused certificate is retried", n)
	}

	base := metricsBase(t, w.logs)
	_, metrics := httpGet(base + "/metrics")
	for _, want := range []string{`fluxora_webhook_endpoint_client_cert_days_left{endpoint="billing"} 29.`,
		`fluxora_webhook_endpoint_client_cert_days_left{endpoint="audit"} 89.`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	_, status, _ := ops(t, db, "status")
	_, statusJSON, _ := ops(t, db, "status", "--json")
	if !strings.Contains(status, "until "+good.NotAfter.UTC().Format("2006-01-02")) || !strings.Contains(status, "(29 days)") ||
		!strings.Contains(statusJSON, `"client_cert_not_after":"`+good.NotAfter.UTC().Format("2006-01-02")) {
		t.Errorf("status does not show the expiry:\n%s\n%s", status, statusJSON)
	}
	for what, text := range map[string]string{"logs": w.logs.String(), "status": status, "status --json": statusJSON, "metrics": metrics} {
		noSecretIn(t, what, text, string(good.KeyPEM[30:80]), string(bad.KeyPEM[30:80]))
	}
}

// A forbidden IP literal is refused by the worker even behind a proxy,
// before anything is sent to the proxy.
func TestProxyStillRefusesForbiddenLiterals(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	proxy := newConnectProxy(t)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('meta', 'https://169.254.169.254/', 'whsec_x')`); err != nil {
		t.Fatal(err)
	}
	enqueue(t, db, "e", `{}`, "meta")
	startInProcess(t, endpointsOnly(db, map[string]string{"WEBHOOK_EGRESS_PROXY": proxy.URL()}))
	waitfor.True(t, 20*time.Second, "dead-lettered", func() bool {
		return db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE last_error LIKE '%egress guard: refused a link-local address%'`) == 1
	})
	if got := proxy.targets(); len(got) != 0 {
		t.Fatalf("the proxy was asked for %v", got)
	}
}

// The trust variables are validated at start-up, each error naming its
// variable and never quoting a proxy's URL (it may hold a password).
func TestTrustConfigRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := writeFile(t, dir, "not.pem", []byte("hello"))
	ca := writeFile(t, dir, "ca.pem", testtls.NewCA(t, "ca").PEM)
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"WEBHOOK_EGRESS_PROXY": "socks5://u:s3cretpw@127.0.0.1:1080"}, "WEBHOOK_EGRESS_PROXY: must be the proxy's http:// or https:// URL"},
		{map[string]string{"WEBHOOK_EGRESS_PROXY": "http://u:s3cretpw@/"}, "WEBHOOK_EGRESS_PROXY: must be"},
		{map[string]string{"WEBHOOK_EGRESS_PROXY": "http://u:s3cretpw@127.0.0.1:3128/path"}, "WEBHOOK_EGRESS_PROXY: must be"},
		{map[string]string{"WEBHOOK_CA_ONLY": "true"}, "WEBHOOK_CA_ONLY: needs WEBHOOK_CA_FILE"},
		{map[string]string{"WEBHOOK_CA_FILE": notPEM}, "WEBHOOK_CA_FILE: " + notPEM + " holds no PEM certificate"},
		{map[string]string{"WEBHOOK_CA_FILE": filepath.Join(dir, "missing")}, "WEBHOOK_CA_FILE: open"},
		{map[string]string{"WEBHOOK_SECRETS_KEY_FILE": filepath.Join(dir, "missing")}, "WEBHOOK_SECRETS_KEY_FILE: open"},
	} {
		env := envFor("postgres://127.0.0.1/x", nil, tc.env)
		_, err := loadConfig(func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
	env := envFor("postgres://127.0.0.1/x", nil, map[string]string{"WEBHOOK_EGRESS_PROXY": "https://u:p@127.0.0.1:3128", "WEBHOOK_CA_FILE": ca})
	cfg, err := loadConfig(func(k string) string { return env[k] })
	if err != nil || cfg.Trust.EgressProxy == nil || cfg.Trust.RootCAs == nil || cfg.Trust.Keys == nil {
		t.Fatalf("a valid trust configuration: %+v, %v", cfg.Trust, err)
	}
	if s := cfg.Trust.String(); strings.Contains(s, "u:p") || !strings.Contains(s, `secrets key "test-1" (2 keys)`) {
		t.Fatalf("trust summary %q", s)
	}
}
