package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// Without WEBHOOK_CONSOLE_TOKEN_FILE, or with a short token, worker
// console exits 2 and says how to make one.
func TestConsoleNeedsToken(t *testing.T) {
	t.Parallel()
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"", short, filepath.Join(t.TempDir(), "missing")} {
		env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none", "WEBHOOK_CONSOLE_TOKEN_FILE": file}
		var out, errb strings.Builder
		code := run(context.Background(), []string{"console"}, func(k string) string { return env[k] }, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "head -c 32 /dev/urandom") || strings.Contains(errb.String(), "abc") {
			t.Fatalf("token file %q: code %d, stderr %q; want 2 and the how-to, never the token", file, code, errb.String())
		}
	}
}

// worker console serves the console at the address it prints, to the
// bearer token of its file only (the line trimmed of the blanks around
// it), and stops with its context.
func TestConsoleServes(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(" 0123456789abcdef-console-token-ok \t\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_CONSOLE_TOKEN_FILE": tokenFile}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"console", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := strings.TrimSpace(strings.TrimPrefix(line, "console: serving "))
	for _, tc := range []struct {
		token string
		want  int
	}{{"0123456789abcdef-console-token-ok", http.StatusOK}, {"0123456789abcdef-console-token-ol", http.StatusUnauthorized}} {
		req, _ := http.NewRequest("GET", base+"api/endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Fatalf("token %q: %d, want %d", tc.token, res.StatusCode, tc.want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d after its context ended, want 0", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker console did not stop with its context")
	}
}
