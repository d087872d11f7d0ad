package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// WEBHOOK_CONSOLE_HOSTS is a comma-separated list of host names, IP
// addresses or host:port; anything else is refused by name. The console
// answers to those and to its --addr host, unless that is a wildcard.
func TestConsoleHostsConfig(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "WEBHOOK_CONSOLE_HOSTS" {
				return v
			}
			return ""
		}
	}
	c, err := loadConsoleEnv(env(" console.example.com, 10.1.2.3:8089,[fd00::1]:443 ,, ops-1.internal. "))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"console.example.com", "10.1.2.3:8089", "[fd00::1]:443", "ops-1.internal."}; !slices.Equal(c.Hosts, want) {
		t.Fatalf("hosts %q, want %q", c.Hosts, want)
	}
	for _, bad := range []string{"https://console.example.com", "console.example.com/path", "a b", "host:99999", "host:0", "-x.example", "é.example", "*.example.com"} {
		_, err := loadConsoleEnv(env(bad))
		if err == nil || !strings.Contains(err.Error(), "WEBHOOK_CONSOLE_HOSTS") {
			t.Errorf("%q: %v, want an error naming WEBHOOK_CONSOLE_HOSTS", bad, err)
		}
	}
	for _, tc := range []struct {
		addr string
		want []string
	}{
		{"127.0.0.1:8089", []string{"a.example", "127.0.0.1"}},
		{"console.internal:8089", []string{"a.example", "console.internal"}},
		{"0.0.0.0:8089", []string{"a.example"}},
		{"[::]:8089", []string{"a.example"}},
		{":8089", []string{"a.example"}},
	} {
		if got := consoleHosts(consoleEnv{Addr: tc.addr, Hosts: []string{"a.example"}}); !slices.Equal(got, tc.want) {
			t.Errorf("--addr %s: hosts %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// worker console keeps answering while hundreds of connections stay idle
// or send half their headers, and answers only for the hosts it serves.
func TestConsoleServesBesideHogs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	const token = "0123456789abcdef-console-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_CONSOLE_TOKEN_FILE": tokenFile, "WEBHOOK_CONSOLE_HOSTS": "console.example.com"}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"console", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() { cancel(); <-done })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "console: serving ")), "/")
	h := &hog{addr: strings.TrimPrefix(base, "http://")}
	for i := range 300 {
		h.open(t, i)
	}
	t.Cleanup(h.close)
	get := func(host string) int {
		req, _ := http.NewRequest("GET", base+"/api/endpoints", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	waitfor.True(t, 20*time.Second, "the console answers beside 300 hogs", func() bool {
		return get(strings.TrimPrefix(base, "http://")) == http.StatusOK
	})
	for host, want := range map[string]int{"console.example.com": http.StatusOK, "rebound.attacker.example": http.StatusMisdirectedRequest} {
		if code := get(host); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}
}
