// Package testdb gives each test its own migrated PostgreSQL database on the
// server named by TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable), and drops it
// when the test ends. A missing server fails the test: it never skips.
//
// Migrated databases are clones of a template database, fluxora_tmpl_ and
// a hash of the schema files, built once per schema version and kept on
// the server (template.go).
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AdminURL is the server tests use, from TEST_DATABASE_URL.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// DB is one test's database.
type DB struct {
	Name string
	URL  string // connection string for workers and pools
	Pool *pgxpool.Pool
}

// New returns a fresh migrated database with an open pool; both are dropped
// at the test's end. It is a clone of the schema's template database
// (TemplateName), built by the first test process that needs it and kept on
// the server for later runs.
func New(t testing.TB) *DB {
	t.Helper()
	return create(t, clone)
}

// NewEmpty creates an unmigrated database.
func NewEmpty(t testing.TB) *DB {
	t.Helper()
	return create(t, func(ctx context.Context, admin *pgx.Conn, name string) error {
		_, err := admin.Exec(ctx, "CREATE DATABASE "+name)
		return err
	})
}

// create makes a database named fluxora_test_<random> with make, and opens
// a pool on it; both are dropped at the test's end.
func create(t testing.TB, newDB func(ctx context.Context, admin *pgx.Conn, name string) error) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := url.Parse(AdminURL()); err != nil {
		t.Fatalf("testdb: TEST_DATABASE_URL: %v", err)
	}
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("testdb: PostgreSQL is required (TEST_DATABASE_URL): %v", err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "fluxora_test_" + hex.EncodeToString(b)
	if err := newDB(ctx, admin, name); err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	db := &DB{Name: name, URL: urlFor(name)}
	t.Cleanup(func() { drop(t, name) })
	db.Pool, err = pgxpool.New(ctx, db.URL)
	if err != nil {
		t.Fatalf("testdb: pool: %v", err)
	}
	t.Cleanup(db.Pool.Close)
	return db
}

// urlFor is AdminURL with database name; AdminURL parses (create checks).
func urlFor(name string) string {
	u, _ := url.Parse(AdminURL())
	u.Path = "/" + name
	return u.String()
}

func drop(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Errorf("testdb: drop %s: %v", name, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("testdb: drop %s: %v", name, err)
	}
}

// Insert enqueues events the way a producer does and returns their ids.
func (db *DB) Insert(t testing.TB, eventType string, payloads ...string) []int64 {
	t.Helper()
	ids := make([]int64, 0, len(payloads))
	for _, p := range payloads {
		var id int64
		err := db.Pool.QueryRow(context.Background(),
			"INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2) RETURNING id", eventType, p).Scan(&id)
		if err != nil {
			t.Fatalf("testdb: insert: %v", err)
		}
		ids = append(ids, id)
	}
	return ids
}

// Count runs a count(*) query and returns the number.
func (db *DB) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("testdb: count %q: %v", query, err)
	}
	return n
}

// DropTimeRanges removes migration 009's time constraints, as on a
// database where they were dropped: the tests of the worker's second line
// of defence against times it cannot handle start from there.
func (db *DB) DropTimeRanges(t testing.TB) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `DO $$
DECLARE c record;
BEGIN
  -- A partitioned table's first (its partitions lose theirs with it, or
  -- keep their own copy, dropped next).
  FOR c IN SELECT conrelid::regclass AS tab, conname FROM pg_constraint WHERE conname LIKE 'webhook\_%\_range'
           ORDER BY (SELECT count(*) FROM pg_partition_ancestors(conrelid)) LOOP
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS %I', c.tab, c.conname);
  END LOOP;
END $$`)
	if err != nil {
		t.Fatalf("testdb: drop the time constraints: %v", err)
	}
}

// Load runs sql, an INSERT … SELECT of a large fixture, as a bulk load
// writes it: in a transaction of its own with the triggers off
// (session_replication_role = replica), so that its rows neither queue a
// NOTIFY each for the commit nor go through the row triggers' checks and
// the foreign keys' one by one. For fixtures of valid rows in tests of
// what the rows are, not of how a producer writes them.
func (db *DB) Load(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	if err != nil {
		t.Fatalf("testdb: load: %v", err)
	}
}
