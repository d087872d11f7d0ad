package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/sealed"
)

var (
	keyFileOnce sync.Once
	keyFileDir  string
	keyFile     string
)

// keyFilePath is the package's key file (two keys: "test-1" seals), made
// once, mode 0600, removed by TestMain; the tests' workers and commands
// get it as WEBHOOK_SECRETS_KEY_FILE.
func keyFilePath() string {
	keyFileOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fluxora-keys")
		if err != nil {
			panic(err)
		}
		keyFileDir = dir
		keyFile = writeKeyFile(dir, "keys", "test-1", "test-0")
	})
	return keyFile
}

// testKeyFile is keyFilePath for a test.
func testKeyFile(t testing.TB) string {
	t.Helper()
	return keyFilePath()
}

func removeKeyFile() {
	if keyFileDir != "" {
		_ = os.RemoveAll(keyFileDir)
	}
}

// writeKeyFile writes a key file of new keys with these ids (the first
// seals) into dir, mode 0600, and returns its path.
func writeKeyFile(dir, name string, ids ...string) string {
	text := ""
	for _, id := range ids {
		line, err := sealed.GenerateKeyLine(id)
		if err != nil {
			panic(err)
		}
		text += line + "\n"
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		panic(err)
	}
	return path
}

// storedSecrets returns the endpoint's secret and previous secret ("" for
// none), opened with the package's key file, and whether each was stored
// sealed.
func storedSecrets(t testing.TB, db *testdb.DB, name string) (secret, previous string, bothSealed bool) {
	t.Helper()
	var id, cur, prev string
	err := db.Pool.QueryRow(context.Background(), `SELECT id::text, secret, coalesce(secret_previous, '') FROM webhook_endpoints WHERE name = $1`, name).
		Scan(&id, &cur, &prev)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(keyFilePath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k, err := sealed.ParseKeyFile(f)
	if err != nil {
		t.Fatal(err)
	}
	s := keyringSealer{k}
	if secret, err = s.OpenSecret(id, cur); err != nil {
		t.Fatal(err)
	}
	if previous, err = s.OpenSecret(id, prev); err != nil {
		t.Fatal(err)
	}
	return secret, previous, sealed.IsSealed(cur) && (prev == "" || sealed.IsSealed(prev))
}
