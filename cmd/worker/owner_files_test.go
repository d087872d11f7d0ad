package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/sealed"
)

// writeMode writes b to dir/name with exactly mode (whatever the umask).
func writeMode(t *testing.T, dir, name string, b []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// A key file its group or others can write is refused, naming the
// variable, the file and chmod; one they can read is used, with one
// warning (in the start-up log's configuration, and on an operator
// command's stderr); one over 64 KiB is refused, not cut.
func TestKeyFileOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line, err := sealed.GenerateKeyLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.SplitN(line, ":", 2)[1]
	text := []byte(line + "\n")
	big := append([]byte(line+"\n"), []byte(strings.Repeat("#", sealed.MaxKeyFileBytes))...)
	for _, tc := range []struct {
		name      string
		text      []byte
		mode      os.FileMode
		want      string // the refusal, "" when used
		wantsWarn bool
	}{
		{"owner's alone", text, 0o600, "", false},
		{"read-only", text, 0o400, "", false},
		{"group reads", text, 0o640, "", true},
		{"everyone reads", text, 0o644, "", true},
		{"group writes", text, 0o620, "can be written by its group or others (mode 0620): refused; make it the owner's alone: chmod 0600", false},
		{"others write", text, 0o602, "can be written by its group or others (mode 0602)", false},
		{"everyone writes", text, 0o666, "chmod 0600", false},
		{"over 64 KiB", big, 0o600, "is over 64 KiB: refused, not cut", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeMode(t, dir, strings.ReplaceAll(tc.name, " ", "-"), tc.text, tc.mode)
			env := envFor("postgres://127.0.0.1/x", nil, map[string]string{"WEBHOOK_SECRETS_KEY_FILE": p})
			cfg, err := loadConfig(func(k string) string { return env[k] })
			var stderr strings.Builder
			k, kerr := secretsKeyring(func(k string) string { return env[k] }, &stderr)
			if tc.want != "" {
				for _, err := range []error{err, kerr} {
					if err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRETS_KEY_FILE: "+p+" ") ||
						!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), key) {
						t.Fatalf("mode %04o: %v, want %q naming the variable and the file", tc.mode, err, tc.want)
					}
				}
				return
			}
			if err != nil || cfg.Trust.Keys == nil || kerr != nil || k.Primary() != "k1" {
				t.Fatalf("mode %04o: %v, %v; want the keys used", tc.mode, err, kerr)
			}
			warning := "WEBHOOK_SECRETS_KEY_FILE: " + p + " can be read by its group or others"
			if !tc.wantsWarn {
				if len(cfg.Trust.Warnings) != 0 || stderr.Len() != 0 {
					t.Fatalf("mode %04o: warned %q, %q", tc.mode, cfg.Trust.Warnings, stderr.String())
				}
				return
			}
			if len(cfg.Trust.Warnings) != 1 || !strings.HasPrefix(cfg.Trust.Warnings[0], warning) ||
				strings.Count(stderr.String(), warning) != 1 || !strings.Contains(stderr.String(), "chmod 0600") {
				t.Fatalf("mode %04o: warnings %q, stderr %q; want one %q", tc.mode, cfg.Trust.Warnings, stderr.String(), warning)
			}
			// The worker logs it once at start (here, before it finds no
			// database).
			var logs strings.Builder
			env["DATABASE_URL"] = "postgres://127.0.0.1:1/none?connect_timeout=5"
			run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard, &logs)
			if strings.Count(logs.String(), "can be read by its group or others") != 1 || !strings.Contains(logs.String(), `"level":"WARN"`) {
				t.Fatalf("mode %04o: the worker logged\n%s\nwant one warning", tc.mode, logs.String())
			}
		})
	}
}

// worker console refuses a token file its group or others can write,
// warns once of one they can read, and refuses a token shorter than 32
// characters or of fewer than 12 distinct ones, never printing it.
func TestConsoleTokenRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const good = "Zq3vN8xK-2mWp7rT_c5yH9bL4dF6gJ1s" // 32 characters, all distinct
	for _, tc := range []struct {
		name  string
		line  string
		mode  os.FileMode
		want  string // on stderr
		warns bool
	}{
		{"sixteen a", strings.Repeat("a", 16), 0o600, "is shorter than 32 characters", false},
		{"thirty-one", good[:31], 0o600, "is shorter than 32 characters", false},
		{"few distinct", strings.Repeat("abcdefghijk", 4), 0o600, "has fewer than 12 distinct characters", false},
		{"only blanks", " \t ", 0o600, "holds no token on its first line", false},
		{"group writes", good, 0o660, "WEBHOOK_CONSOLE_TOKEN_FILE: %s can be written by its group or others (mode 0660)", false},
		{"others write", good, 0o646, "chmod 0600", false},
		{"everyone reads", good, 0o644, "WEBHOOK_CONSOLE_TOKEN_FILE: %s can be read by its group or others (mode 0644)", true},
		{"group reads", good, 0o440, "WEBHOOK_CONSOLE_TOKEN_FILE: %s can be read by its group or others (mode 0440)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeMode(t, dir, strings.ReplaceAll(tc.name, " ", "-"), []byte(tc.line+"\n"), tc.mode)
			env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none", "WEBHOOK_CONSOLE_TOKEN_FILE": p}
			var out, errb strings.Builder
			code := run(context.Background(), []string{"console"}, func(k string) string { return env[k] }, &out, &errb)
			want := strings.ReplaceAll(tc.want, "%s", p)
			if !strings.Contains(errb.String(), want) || (strings.TrimSpace(tc.line) != "" && strings.Contains(errb.String(), tc.line)) {
				t.Fatalf("stderr %q; want %q, never the token", errb.String(), want)
			}
			if tc.warns {
				// Used: the run goes on to the (absent) database.
				if n := strings.Count(errb.String(), "warning: "); n != 1 || strings.Contains(errb.String(), "head -c 32") {
					t.Fatalf("stderr %q: want one warning and the token taken", errb.String())
				}
				return
			}
			if code != exitUsage || !strings.Contains(errb.String(), "head -c 32 /dev/urandom") {
				t.Fatalf("code %d, stderr %q; want 2 and the how-to", code, errb.String())
			}
		})
	}
}
