package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// riverChildEnv, set to 1, makes this binary run as the River child.
const riverChildEnv = "BENCH_RIVER_CHILD"

// riverHTTPTimeout is the River job's HTTP timeout unless
// BENCH_RIVER_HTTP_TIMEOUT says otherwise: the worker's default
// WEBHOOK_TIMEOUT_MS.
const riverHTTPTimeout = 10 * time.Second

// riverReadyLine is what the child prints on stdout once its client runs.
const riverReadyLine = "river: ready"

// riverVersion is the River module version this binary was built with.
var riverVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}()

// deliveryWorker is River's worker: it signs the job's JSON args like the
// Fluxora worker signs a payload and POSTs them to the consumer, failing the
// job (so River retries it) on anything but 2xx.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	client *http.Client
	url    string
	secret []byte
}

func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	body := job.EncodedArgs
	ts := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("X-Fluxora-Delivery-Id", strconv.FormatInt(job.ID, 10))
	h.Set("X-Fluxora-Event", job.Kind)
	h.Set("X-Fluxora-Timestamp", strconv.FormatInt(ts, 10))
	h.Set("X-Fluxora-Signature", sign(w.secret, ts, body))
	h.Set("X-Fluxora-Attempt", strconv.Itoa(job.Attempt))
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%w: http %d", errNotDelivered, resp.StatusCode)
	}
	return nil
}

// fixedRetry retries after delay with the worker's jitter (-20%..0 after its
// clamp to the maximum), for the retry mode.
type fixedRetry struct{ delay time.Duration }

func (p fixedRetry) NextRetry(*rivertype.JobRow) time.Time {
	return time.Now().Add(time.Duration(float64(p.delay) * (0.8 + 0.2*rand.Float64())))
}

// riverChildMain runs River until SIGTERM, configured by BENCH_* variables.
func riverChildMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runRiverChild(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "river child:", err)
		return 1
	}
	return 0
}

func runRiverChild(ctx context.Context, getenv func(string) string) error {
	workers, err := strconv.Atoi(getenv("BENCH_RIVER_WORKERS"))
	if err != nil {
		return fmt.Errorf("BENCH_RIVER_WORKERS: %w", err)
	}
	cooldown, _ := time.ParseDuration(getenv("BENCH_RIVER_FETCH_COOLDOWN"))
	poll, _ := time.ParseDuration(getenv("BENCH_RIVER_FETCH_POLL_INTERVAL"))
	retry, _ := time.ParseDuration(getenv("BENCH_RIVER_RETRY_DELAY"))
	timeout, _ := time.ParseDuration(getenv("BENCH_RIVER_HTTP_TIMEOUT"))
	if timeout <= 0 {
		timeout = riverHTTPTimeout
	}

	pc, err := pgxpool.ParseConfig(getenv("BENCH_DATABASE_URL"))
	if err != nil {
		return err
	}
	pc.MaxConns = riverPoolSize
	pc.ConnConfig.RuntimeParams["application_name"] = riverAppName
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()

	tr := &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers, IdleConnTimeout: 90 * time.Second}
	ws := river.NewWorkers()
	river.AddWorker(ws, &deliveryWorker{
		client: &http.Client{Transport: tr, Timeout: timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		url: getenv("BENCH_WEBHOOK_URL"), secret: []byte(getenv("BENCH_SECRET")),
	})
	cfg := &river.Config{
		FetchCooldown: cooldown, FetchPollInterval: poll,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: ws,
		Logger:  slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if retry > 0 {
		cfg.RetryPolicy = fixedRetry{delay: retry}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	fmt.Println(riverReadyLine)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}
