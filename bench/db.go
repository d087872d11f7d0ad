package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbPrefix starts the name of every database the bench creates; it never
// touches any other.
const dbPrefix = "fluxora_bench_"

// databases creates the bench's databases and drops them again, all of them
// on Close, whatever happened in between.
type databases struct {
	admin *pgxpool.Pool
	base  *url.URL

	mu      sync.Mutex
	created []string
}

func openDatabases(ctx context.Context, adminURL string) (*databases, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("-db must be a postgres:// URL")
	}
	pool, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("admin database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("admin database unreachable: %w", err)
	}
	return &databases{admin: pool, base: u}, nil
}

// create makes a fresh database for one system and returns its URL.
func (d *databases) create(ctx context.Context, system string) (name, dbURL string, err error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name = dbPrefix + strings.ReplaceAll(system, "-", "_") + "_" + hex.EncodeToString(rnd[:])
	if _, err := d.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create database %s: %w", name, err)
	}
	d.mu.Lock()
	d.created = append(d.created, name)
	d.mu.Unlock()
	u := *d.base
	u.Path = "/" + name
	return name, u.String(), nil
}

// drop removes a database this bench created, ending its sessions.
func (d *databases) drop(name string) error {
	d.mu.Lock()
	i := -1
	for j, n := range d.created {
		if n == name {
			i = j
		}
	}
	if i < 0 {
		d.mu.Unlock()
		return fmt.Errorf("drop %s: not created by this run", name)
	}
	d.created = append(d.created[:i], d.created[i+1:]...)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := d.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// Close drops every database still left and closes the admin pool.
func (d *databases) Close() error {
	d.mu.Lock()
	left := append([]string(nil), d.created...)
	d.mu.Unlock()
	var firstErr error
	for _, name := range left {
		if err := d.drop(name); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	d.admin.Close()
	return firstErr
}

// openPool opens a pool of at most size connections to dbURL.
func openPool(ctx context.Context, dbURL string, size int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = size
	cfg.ConnConfig.RuntimeParams["application_name"] = "fluxora-bench-producer"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// produce inserts one event the way a producer does: in its own
// transaction, committed before it returns.
func produce(ctx context.Context, pool *pgxpool.Pool, sys system, ev event) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return sys.insert(ctx, tx, ev) })
}

// commit is one producer transaction: its event's seq and how long it took
// from insert start to COMMIT returned.
type commit struct {
	seq int64
	d   time.Duration
}

// producers runs n producers that each insert single-row transactions as
// fast as they can until d has passed. Every event gets a fresh seq from
// next. It returns every commit and the time the last producer stopped.
func producers(ctx context.Context, pool *pgxpool.Pool, sys system, n int, d time.Duration, next func() int64) ([]commit, time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.Now().Add(d)
	var (
		mu    sync.Mutex
		all   []commit
		first error
		wg    sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			var mine []commit
			var err error
			for time.Now().Before(stop) && ctx.Err() == nil {
				t := time.Now()
				ev := event{Seq: next(), T: t.UnixNano()}
				if err = produce(ctx, pool, sys, ev); err != nil {
					cancel()
					break
				}
				mine = append(mine, commit{seq: ev.Seq, d: time.Since(t)})
			}
			mu.Lock()
			all = append(all, mine...)
			if err != nil && first == nil {
				first = fmt.Errorf("producer: %w", err)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, time.Now(), first
}

// payloadJSON is the body every system delivers for ev.
func payloadJSON(ev event) string {
	return fmt.Sprintf(`{"seq":%d,"t":%d}`, ev.Seq, ev.T)
}
