package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The systems, by the names -systems takes.
const (
	sysWorkerDefaults = "worker-defaults"
	sysWorkerTuned    = "worker-tuned"
	sysRiverDefaults  = "river-defaults"
	sysRiverTuned     = "river-tuned"
	sysRiver200       = "river-200"
	sysPollOnly       = "poll-only"
	// sysWorkerBefore is -worker-before's binary with default settings:
	// an earlier release beside this one in the same run.
	sysWorkerBefore = "worker-before"
	// sysWorkerBeforeTuned is the same binary with worker-tuned's settings.
	sysWorkerBeforeTuned = "worker-before-tuned"
	// sysWorkerTunedIdle is worker-tuned beside an idle endpoint of the
	// table (subscribed to a type nothing has): what an endpoint with
	// nothing to send costs the WEBHOOK_URL endpoint's deliveries.
	sysWorkerTunedIdle = "worker-tuned-idle"
	// sysWorkerTunedDead is worker-tuned beside a dead endpoint of the
	// table holding -scale-backlog deliveries that wait for their next
	// attempt (due in a day): what such an endpoint costs the WEBHOOK_URL
	// endpoint's deliveries.
	sysWorkerTunedDead = "worker-tuned-dead"
	// sysWorkerTunedTraced is worker-tuned with OTLP/HTTP tracing on,
	// exporting every attempt's span to the bench's sink (otlpSink):
	// what tracing costs.
	sysWorkerTunedTraced = "worker-tuned-traced"
)

var allSystems = append(append([]string(nil), defaultSystems...), sysWorkerBefore, sysWorkerBeforeTuned, sysWorkerTunedIdle,
	sysWorkerTunedDead, sysWorkerTunedTraced)

// defaultSystems run when -systems is not given: all but worker-before and
// worker-before-tuned, which need -worker-before.
var defaultSystems = []string{sysWorkerDefaults, sysWorkerTuned, sysRiverDefaults, sysRiverTuned, sysRiver200, sysPollOnly}

// workerDefaultConcurrency is the worker's default WEBHOOK_CONCURRENCY, for
// the SYSTEMS table and as the slots of worker-defaults should its start-up
// log line not say (the slots are read from that line).
const workerDefaultConcurrency = 100

// slotsAssumed is the slots' source when the worker did not log them.
const slotsAssumed = "assumed: no worker: started line"

// startedTimeout bounds the wait for the worker's "worker: started" line
// once it is ready (it is logged right after the metrics server starts).
const startedTimeout = 5 * time.Second

// readyTimeout bounds how long a system may take to start.
const readyTimeout = 60 * time.Second

// system is one contender. The bench gives it a fresh database (setup),
// empties its queue between modes (reset) and starts it as a child process
// once per mode, with extra environment for that mode.
type system interface {
	// Name is the name -systems takes and the table shows.
	Name() string
	// Settings describes the configuration, for the table.
	Settings() string
	// Worker reports whether this is the worker under test (targets apply).
	Worker() bool
	// Slots is how many deliveries the system runs at once, as of its last
	// start, and where that figure comes from.
	Slots() (n int, source string)
	// PollInterval is how long a new row may wait without a wake-up, or 0
	// when the system is woken on insert.
	PollInterval() time.Duration
	setup(ctx context.Context, dbURL string, pool *pgxpool.Pool) error
	reset(ctx context.Context) error
	insert(ctx context.Context, tx pgx.Tx, ev event) error
	insertBacklog(ctx context.Context, n int) error
	start(ctx context.Context, env []string) (*proc, error)
	// retryDue returns, by seq, when each event's second attempt was due.
	retryDue(ctx context.Context) (map[int64]time.Time, error)
	// retryEnv is the extra environment for the retry mode.
	retryEnv() []string
	// hangEnv is the extra environment for the tail-hang mode: requests
	// time out after timeout, retries come back after about 200 ms.
	hangEnv(timeout time.Duration) []string
	// backendApps are the application_names of the system's database
	// sessions, to measure the CPU it costs PostgreSQL.
	backendApps() []string
	close()
}

// common is what every system holds: its database and the consumer.
type common struct {
	name        string
	dbURL       string
	pool        *pgxpool.Pool
	consumerURL string
	secret      string
	pad         string // the drain backlog's payload padding (-payload-bytes)
}

// padding is n bytes of text that compresses about as poorly as a real
// payload's values (base64 of a fixed pseudo-random stream), the same on
// every run and for every system.
func padding(n int) string {
	if n <= 0 {
		return ""
	}
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, n)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	return base64.StdEncoding.EncodeToString(raw)[:n]
}

func (c *common) Name() string { return c.name }

// workerSystem is the worker binary, with the trigger or without (pollOnly).
type workerSystem struct {
	common
	bin      string
	env      []string // the system's settings, e.g. WEBHOOK_BATCH_SIZE=100
	pollOnly bool
	// idle adds an endpoint to the table at setup, subscribed to
	// scaleIdleType, which nothing inserts.
	idle bool
	// dead adds an endpoint to the table at setup, subscribed to
	// scaleIdleType, with this many deliveries due in a day; reset keeps
	// them.
	dead int
	// listenURL is WEBHOOK_LISTEN_DATABASE_URL ("": unset) when dbURL goes
	// through PgBouncer (-pgbouncer).
	listenURL string
	// traced turns OTLP/HTTP tracing on, exporting to sink (started by
	// setup, closed by close).
	traced bool
	sink   *otlpSink

	slots       int    // concurrency of the last start
	slotsSource string // where slots comes from
}

func (s *workerSystem) Settings() string {
	if s.pollOnly {
		return "trigger dropped (polling only); WEBHOOK_POLL_INTERVAL_MS=10000, other settings default"
	}
	if len(s.env) == 0 {
		return fmt.Sprintf("default settings (WEBHOOK_CONCURRENCY %d, as its start-up log says)", workerDefaultConcurrency)
	}
	if s.traced {
		return strings.Join(s.env, " ") + "; OTLP/HTTP tracing to the bench's sink on 127.0.0.1 (every attempt a span, OTEL_BSP_* defaults)"
	}
	return strings.Join(s.env, " ")
}

func (s *workerSystem) Worker() bool { return !s.pollOnly }

func (s *workerSystem) Slots() (int, string) { return s.slots, s.slotsSource }

func (s *workerSystem) PollInterval() time.Duration {
	if s.pollOnly {
		return 10 * time.Second
	}
	return 0
}

func (s *workerSystem) setup(ctx context.Context, dbURL string, pool *pgxpool.Pool) error {
	s.dbURL, s.pool = dbURL, pool
	cmd := exec.CommandContext(ctx, s.bin, "migrate")
	cmd.Env = childEnv("DATABASE_URL=" + dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("worker migrate: %w\n%s", err, out)
	}
	if s.idle {
		if _, err := pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret, event_types)
			VALUES ('idle', 'http://127.0.0.1:9/idle', 'whsec_aWRsZS1lbmRwb2ludC1zZWNyZXQ=', ARRAY[$1])`, scaleIdleType); err != nil {
			return fmt.Errorf("idle endpoint: %w", err)
		}
	}
	if s.dead > 0 {
		if _, err := pool.Exec(ctx, `WITH e AS (INSERT INTO webhook_endpoints (name, url, secret, event_types)
			VALUES ('dead', 'http://127.0.0.1:9/dead', 'whsec_ZGVhZC1lbmRwb2ludC1zZWNyZXQ=', ARRAY[$1]) RETURNING id)
			INSERT INTO webhook_outbox (event_type, payload, endpoint_id, attempt, created_at)
			SELECT $1, '{}', e.id, 5, now() + interval '1 day' FROM e, generate_series(1, $2)`, scaleIdleType, s.dead); err != nil {
			return fmt.Errorf("dead endpoint: %w", err)
		}
		if _, err := pool.Exec(ctx, "ANALYZE webhook_outbox"); err != nil {
			return fmt.Errorf("dead endpoint: %w", err)
		}
	}
	if s.pollOnly {
		if _, err := pool.Exec(ctx, "DROP TRIGGER webhook_outbox_notify ON webhook_outbox"); err != nil {
			return fmt.Errorf("drop trigger: %w", err)
		}
	}
	if s.traced {
		var err error
		if s.sink, err = newOTLPSink(); err != nil {
			return fmt.Errorf("OTLP sink: %w", err)
		}
	}
	return nil
}

func (s *workerSystem) reset(ctx context.Context) error {
	if s.dead > 0 {
		// The dead endpoint's deliveries stay.
		_, err := s.pool.Exec(ctx, "DELETE FROM webhook_outbox WHERE endpoint_id IS NULL; TRUNCATE webhook_dead_letter")
		return err
	}
	_, err := s.pool.Exec(ctx, "TRUNCATE webhook_outbox, webhook_dead_letter")
	return err
}

const outboxInsertSQL = `INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2)`

func (s *workerSystem) insert(ctx context.Context, tx pgx.Tx, ev event) error {
	_, err := tx.Exec(ctx, outboxInsertSQL, "bench.event", payloadJSON(ev))
	return err
}

// insertBacklog inserts n rows (seq 0..n-1) in one statement.
func (s *workerSystem) insertBacklog(ctx context.Context, n int) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload)
		SELECT 'bench.event', jsonb_build_object('seq', g, 't', $2::bigint) || CASE WHEN $3 = '' THEN '{}' ELSE jsonb_build_object('pad', $3::text) END
		FROM generate_series(0, $1 - 1) AS g`, n, time.Now().UnixNano(), s.pad)
	if err == nil {
		_, err = s.pool.Exec(ctx, "ANALYZE webhook_outbox")
	}
	return err
}

func (s *workerSystem) retryEnv() []string {
	return []string{"WEBHOOK_BACKOFF_BASE_MS=200", "WEBHOOK_BACKOFF_MAX_MS=200"}
}

func (s *workerSystem) hangEnv(timeout time.Duration) []string {
	return []string{"WEBHOOK_TIMEOUT_MS=" + strconv.FormatInt(timeout.Milliseconds(), 10), "WEBHOOK_BACKOFF_BASE_MS=200"}
}

func (s *workerSystem) retryDue(ctx context.Context) (map[int64]time.Time, error) {
	return dueTimes(ctx, s.pool, `SELECT (payload->>'seq')::bigint, created_at FROM webhook_outbox WHERE attempt = 2`)
}

func dueTimes(ctx context.Context, pool *pgxpool.Pool, query string) (map[int64]time.Time, error) {
	rows, err := pool.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	out := map[int64]time.Time{}
	var (
		seq int64
		at  time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&seq, &at}, func() error { out[seq] = at; return nil })
	return out, err
}

func (s *workerSystem) backendApps() []string {
	return []string{"fluxora-webhook-worker", "fluxora-webhook-listener"}
}

func (s *workerSystem) close() {
	if s.sink != nil {
		s.sink.Close()
	}
}

// traceSpans is how many spans the system's OTLP sink has received (0
// when it traces nothing).
func (s *workerSystem) traceSpans() int64 {
	if s.sink == nil {
		return 0
	}
	return s.sink.spans.Load()
}

// start runs the dispatcher, waits until /readyz answers 200 and reads its
// concurrency from its "worker: started" line.
func (s *workerSystem) start(ctx context.Context, extra []string) (*proc, error) {
	env := childEnv(
		"DATABASE_URL="+s.dbURL, "WEBHOOK_URL="+s.consumerURL, "WEBHOOK_SECRET="+s.secret,
		"WEBHOOK_METRICS_ADDR=127.0.0.1:0", "LOG_LEVEL=info", "LOG_FORMAT=json")
	if s.listenURL != "" {
		env = append(env, "WEBHOOK_LISTEN_DATABASE_URL="+s.listenURL)
	}
	if s.sink != nil {
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+s.sink.url, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	}
	env = append(append(env, s.env...), extra...)
	p, err := startProc(s.name, s.bin, nil, env)
	if err != nil {
		return nil, err
	}
	var logged string // the started line's concurrency, should it come first
	addr, err := p.waitLine(ctx, readyTimeout, func(line string) string {
		logged = cmp.Or(startedConcurrency(line), logged)
		return metricsAddr(line)
	})
	if err == nil {
		err = waitReady(ctx, p, "http://"+addr+"/readyz", readyTimeout)
	}
	if err == nil && logged == "" {
		// Normally logged just after the metrics line; a worker that does
		// not log it at all costs startedTimeout and gets assumed slots.
		logged, _ = p.waitLine(ctx, startedTimeout, startedConcurrency)
		err = ctx.Err()
	}
	if err != nil {
		_ = p.Stop()
		return nil, err
	}
	p.metrics = "http://" + addr + "/metrics"
	s.slots, s.slotsSource = configuredConcurrency(env), slotsAssumed
	if n, err := strconv.Atoi(logged); err == nil {
		s.slots, s.slotsSource = n, "worker: started log line"
	}
	return p, nil
}

// configuredConcurrency is the last WEBHOOK_CONCURRENCY in env, or the
// worker's default.
func configuredConcurrency(env []string) int {
	n := workerDefaultConcurrency
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "WEBHOOK_CONCURRENCY="); ok {
			if c, err := strconv.Atoi(v); err == nil {
				n = c
			}
		}
	}
	return n
}

// startedConcurrency returns the "concurrency" of the worker's
// "worker: started" log line.
func startedConcurrency(line string) string {
	var l struct {
		Msg         string `json:"msg"`
		Concurrency int    `json:"concurrency"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "worker: started" || l.Concurrency < 1 {
		return ""
	}
	return strconv.Itoa(l.Concurrency)
}

// metricsAddr returns the "addr" of the worker's "serving /metrics" log line.
func metricsAddr(line string) string {
	var l struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || !strings.HasPrefix(l.Msg, "worker: serving /metrics") {
		return ""
	}
	return l.Addr
}

// waitReady polls url until it answers 200, the process exits or the
// deadline passes.
func waitReady(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%v):\n%s", p.name, p.err, p.Tail())
		case <-ctx.Done():
			return fmt.Errorf("%s: %s not 200 after %s: %w\n%s", p.name, url, timeout, ctx.Err(), p.Tail())
		}
	}
}

// childEnv is the bench's environment without anything that configures the
// worker or the River child (OTEL_* too: only worker-tuned-traced traces),
// plus vars.
func childEnv(vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "WEBHOOK_") || strings.HasPrefix(k, "BENCH_") || strings.HasPrefix(k, "LOG_") ||
			strings.HasPrefix(k, "OTEL_") || k == "DATABASE_URL" || k == "REDIS_URL" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, vars...)
}

// tunedEnv is the worker-tuned system's settings.
func tunedEnv(batch, concurrency int) []string {
	return []string{"WEBHOOK_BATCH_SIZE=" + strconv.Itoa(batch), "WEBHOOK_CONCURRENCY=" + strconv.Itoa(concurrency)}
}
