// Command consolebench measures the pages of `worker console`
// against a database holding a long history: -endpoints endpoints,
// -history processed rows and as many attempts spread over the last 7 days
// (the daily partitions a worker with the default retention makes), a
// pending backlog and dead letters. It times each page and API call
// -runs times over loopback, after a warm-up, and prints p50, p95 and max.
//
//	cd bench && go run ./consolebench
//
// The database it creates (fluxora_bench_console_…) is dropped at the end.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

type options struct {
	db, worker         string
	endpoints, history int
	deadLetters, runs  int
	pending            int
	keep               bool
}

func main() {
	var o options
	flag.StringVar(&o.db, "db", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "admin URL of the PostgreSQL server")
	flag.StringVar(&o.worker, "worker", "", "the worker binary (default: built from ../cmd/worker)")
	flag.IntVar(&o.endpoints, "endpoints", 1000, "endpoints")
	flag.IntVar(&o.history, "history", 1_000_000, "processed rows, and as many attempts, over the last 7 days")
	flag.IntVar(&o.pending, "pending", 10_000, "pending deliveries")
	flag.IntVar(&o.deadLetters, "dead-letters", 10_000, "dead letters")
	flag.IntVar(&o.runs, "runs", 30, "timed requests per page")
	flag.BoolVar(&o.keep, "keep", false, "keep the database (its URL is printed) to EXPLAIN the console's statements")
	flag.Parse()
	ctx := context.Background()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "consolebench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "consolebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.worker == "" {
		o.worker = filepath.Join(tmp, "worker")
		build := exec.CommandContext(ctx, "go", "build", "-o", o.worker, "./cmd/worker")
		build.Dir, build.Stderr = "..", os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the worker: %w", err)
		}
	}
	dbURL, drop, err := createDB(ctx, o.db)
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(out, "database kept:", dbURL)
	} else {
		defer drop()
	}
	env := append(os.Environ(), "DATABASE_URL="+dbURL)
	migrate := exec.CommandContext(ctx, o.worker, "migrate")
	migrate.Env, migrate.Stderr = env, os.Stderr
	if err := migrate.Run(); err != nil {
		return fmt.Errorf("worker migrate: %w", err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	start := time.Now()
	if err := populate(ctx, pool, o); err != nil {
		return err
	}
	fmt.Fprintf(out, "data: %d endpoints, %d processed rows and %d attempts over 7 days (daily partitions), %d pending, %d dead letters (loaded in %s)\n",
		o.endpoints, o.history, o.history, o.pending, o.deadLetters, time.Since(start).Round(time.Second))
	base, token, stop, err := startConsole(ctx, o.worker, env, tmp)
	if err != nil {
		return err
	}
	defer stop()
	var delivery, event string
	if err := pool.QueryRow(ctx, `SELECT delivery_id::text FROM webhook_attempts WHERE started_at > now() - interval '30 minutes' LIMIT 1`).Scan(&delivery); err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, `SELECT delivery_id::text FROM webhook_outbox WHERE processed AND processed_at > now() - interval '30 minutes' LIMIT 1`).Scan(&event); err != nil {
		return err
	}
	mid := fmt.Sprintf("ep%04d", o.endpoints/2)
	pages := []string{"/", "/api/overview", "/api/endpoints", "/endpoints/" + mid, "/api/endpoints/" + mid, "/dead-letters",
		"/dead-letters?endpoint=" + mid, "/api/dead-letters?event_type=bench.other", "/deliveries?id=" + delivery, "/deliveries?id=" + event}
	fmt.Fprintf(out, "%-48s %8s %8s %8s %10s\n", "page", "p50", "p95", "max", "bytes")
	for _, p := range pages {
		if err := measure(ctx, out, base+p, token, o.runs); err != nil {
			return err
		}
	}
	return nil
}

// createDB creates fluxora_bench_console_<random> and returns its URL and
// the function that drops it.
func createDB(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "fluxora_bench_console_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	return u.String(), func() {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		conn.Close(context.Background())
	}, nil
}

// populate loads the data: endpoints, history and attempts in chunks,
// pending rows, dead letters; then VACUUM ANALYZE and a checkpoint.
func populate(ctx context.Context, pool *pgxpool.Pool, o options) error {
	const chunk = 250_000
	steps := []string{
		fmt.Sprintf(`INSERT INTO webhook_endpoints (name, url, secret) SELECT format('ep%%s', lpad(g::text, 4, '0')), 'http://127.0.0.1:9/hook', 'whsec_bench'
			FROM generate_series(1, %d) g`, o.endpoints),
		`SELECT webhook_history_prepare(p, interval '1 day', now() - interval '8 days', now()) FROM unnest(ARRAY['webhook_outbox_history', 'webhook_attempts']) p`,
	}
	for from := 0; from < o.history; from += chunk {
		to := min(o.history, from+chunk)
		// Row g is processed at now() - 7 days * g/n, to endpoint g % endpoints;
		// its attempt started 50 ms before, 95% delivered.
		steps = append(steps, fmt.Sprintf(`WITH e AS (SELECT array_agg(id ORDER BY name) ids FROM webhook_endpoints),
			h AS (SELECT g, now() - interval '7 days' * (g::float8 / %[1]d) AS at, gen_random_uuid() AS id FROM generate_series(%[2]d, %[3]d - 1) g),
			o AS (INSERT INTO webhook_outbox (delivery_id, event_type, payload, created_at, processed, processed_at, endpoint_id)
			  SELECT h.id, 'bench.event', jsonb_build_object('seq', h.g), h.at - interval '100 ms', true, h.at, e.ids[1 + h.g %% %[4]d] FROM h, e)
			INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
			SELECT h.id, e.ids[1 + h.g %% %[4]d], 1, h.at - interval '50 ms', 5 + (h.g %% 97),
			  CASE WHEN h.g %% 20 = 0 THEN 503 ELSE 200 END, CASE WHEN h.g %% 20 = 0 THEN 'retryable' END, CASE WHEN h.g %% 20 = 0 THEN 'http 503' END
			FROM h, e`, o.history, from, to, o.endpoints))
	}
	steps = append(steps,
		fmt.Sprintf(`INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
			SELECT 'bench.event', '{"pending": true}', e.id, now() + interval '1 hour' FROM generate_series(1, %d) g
			JOIN webhook_endpoints e ON e.name = format('ep%%s', lpad((1 + g %% %d)::text, 4, '0'))`, o.pending, o.endpoints),
		fmt.Sprintf(`INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, died_at)
			SELECT gen_random_uuid(), CASE WHEN g %% 10 = 0 THEN 'bench.other' ELSE 'bench.event' END, '{"dead": true}', 16, 503, 'http 503', e.id,
			  now() - interval '7 days' * (g::float8 / %[1]d)
			FROM generate_series(1, %[1]d) g JOIN webhook_endpoints e ON e.name = format('ep%%s', lpad((1 + g %% %[2]d)::text, 4, '0'))`, o.deadLetters, o.endpoints),
		"VACUUM ANALYZE", "CHECKPOINT")
	for _, s := range steps {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("populate: %w", err)
		}
	}
	return nil
}

// startConsole starts `worker console` on a free loopback port with a
// token file, and returns its base URL and token.
func startConsole(ctx context.Context, bin string, env []string, dir string) (base, token string, stop func(), err error) {
	token = "consolebench-token-0123456789abcdef"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return "", "", nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "console", "--addr", "127.0.0.1:0")
	cmd.Env, cmd.Stderr = append(env, "WEBHOOK_CONSOLE_TOKEN_FILE="+tokenFile), os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", "", nil, err
	}
	stop = func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", "", nil, fmt.Errorf("worker console printed no address: %w", err)
	}
	return strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "console: serving ")), "/"), token, stop, nil
}

// measure GETs u 3 times to warm up, then runs times, and prints the
// percentiles of the time to the whole answer.
func measure(ctx context.Context, out io.Writer, u, token string, runs int) error {
	var times []time.Duration
	var size int
	for i := range runs + 3 {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		t := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		d := time.Since(t)
		if err != nil || res.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d %v", u, res.StatusCode, err)
		}
		if i >= 3 {
			times, size = append(times, d), len(b)
		}
	}
	slices.Sort(times)
	pct := func(p float64) string {
		return fmt.Sprintf("%.1fms", float64(times[int(p*float64(len(times)-1))].Microseconds())/1000)
	}
	path := u[strings.Index(u[len("http://"):], "/")+len("http://"):]
	if len(path) > 48 {
		path = path[:45] + "..."
	}
	fmt.Fprintf(out, "%-48s %8s %8s %8s %10d\n", path, pct(0.5), pct(0.95), pct(1), size)
	return nil
}
