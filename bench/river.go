package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverDefaultWorkers is MaxWorkers for river-defaults: River's usual
// default (river.QueueConfig's MaxWorkers must be set; 100 is what River's
// documentation and examples use), and also the worker's default
// WEBHOOK_CONCURRENCY, so that the two "defaults" systems run as many
// deliveries at once.
const riverDefaultWorkers = 100

// river200Workers is MaxWorkers for river-200, the tail modes' River: as
// many deliveries at once as worker-tuned.
const river200Workers = 200

// riverPoolSize is the River child's connection pool size in both River
// systems (pgxpool's default would be 4 on this machine).
const riverPoolSize = 16

// deliveryArgs is River's job: deliver one event. Its JSON is the payload.
type deliveryArgs struct {
	Seq int64  `json:"seq"`
	T   int64  `json:"t"`
	Pad string `json:"pad,omitempty"` // -payload-bytes
}

// Kind is the River job kind.
func (deliveryArgs) Kind() string { return "webhook_delivery" }

// riverSystem is River running in a child process (this binary, re-executed
// with BENCH_RIVER_CHILD=1); the bench inserts through an insert-only client
// with the same FetchCooldown, since River's insert-side NOTIFY is limited
// by the inserting client's FetchCooldown.
type riverSystem struct {
	common
	bin               string // this executable
	maxWorkers        int
	fetchCooldown     time.Duration // 0: River's default
	fetchPollInterval time.Duration // 0: River's default
	client            *river.Client[pgx.Tx]
}

func (s *riverSystem) Slots() (int, string) { return s.maxWorkers, "MaxWorkers" }

func (s *riverSystem) Settings() string {
	cooldown, poll := "100ms (default)", "1s (default)"
	if s.fetchCooldown > 0 {
		cooldown = s.fetchCooldown.String()
	}
	if s.fetchPollInterval > 0 {
		poll = s.fetchPollInterval.String()
	}
	return fmt.Sprintf("MaxWorkers=%d FetchCooldown=%s FetchPollInterval=%s; pool %d conns; River %s",
		s.maxWorkers, cooldown, poll, riverPoolSize, riverVersion)
}

func (s *riverSystem) Worker() bool { return false }

func (s *riverSystem) PollInterval() time.Duration { return 0 }

func (s *riverSystem) setup(ctx context.Context, dbURL string, pool *pgxpool.Pool) error {
	s.dbURL, s.pool = dbURL, pool
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	s.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown: s.fetchCooldown, FetchPollInterval: s.fetchPollInterval,
	})
	return err
}

func (s *riverSystem) reset(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "TRUNCATE river_job")
	return err
}

func (s *riverSystem) insert(ctx context.Context, tx pgx.Tx, ev event) error {
	_, err := s.client.InsertTx(ctx, tx, deliveryArgs{Seq: ev.Seq, T: ev.T}, nil)
	return err
}

func (s *riverSystem) insertBacklog(ctx context.Context, n int) error {
	const chunk = 5000
	t := time.Now().UnixNano()
	params := make([]river.InsertManyParams, 0, chunk)
	for lo := 0; lo < n; lo += chunk {
		params = params[:0]
		for i := lo; i < min(lo+chunk, n); i++ {
			params = append(params, river.InsertManyParams{Args: deliveryArgs{Seq: int64(i), T: t, Pad: s.pad}})
		}
		if _, err := s.client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("river insert many: %w", err)
		}
	}
	_, err := s.pool.Exec(ctx, "ANALYZE river_job")
	return err
}

func (s *riverSystem) retryEnv() []string { return []string{"BENCH_RIVER_RETRY_DELAY=200ms"} }

// hangEnv: the job's http.Client times out after timeout, and the job is
// retried after 160–200 ms.
func (s *riverSystem) hangEnv(timeout time.Duration) []string {
	return []string{"BENCH_RIVER_RETRY_DELAY=200ms", "BENCH_RIVER_HTTP_TIMEOUT=" + timeout.String()}
}

// retryDue: River keeps the retry's due time in scheduled_at.
func (s *riverSystem) retryDue(ctx context.Context) (map[int64]time.Time, error) {
	return dueTimes(ctx, s.pool, `SELECT (args->>'seq')::bigint, scheduled_at FROM river_job WHERE attempt = 2`)
}

// riverAppName is the River child's application_name.
const riverAppName = "fluxora-bench-river"

func (s *riverSystem) backendApps() []string { return []string{riverAppName} }

func (s *riverSystem) close() {}

// start runs the River child and waits until its client has started.
func (s *riverSystem) start(ctx context.Context, extra []string) (*proc, error) {
	env := childEnv(riverChildEnv+"=1",
		"BENCH_DATABASE_URL="+s.dbURL, "BENCH_WEBHOOK_URL="+s.consumerURL, "BENCH_SECRET="+s.secret,
		fmt.Sprintf("BENCH_RIVER_WORKERS=%d", s.maxWorkers),
		"BENCH_RIVER_FETCH_COOLDOWN="+s.fetchCooldown.String(),
		"BENCH_RIVER_FETCH_POLL_INTERVAL="+s.fetchPollInterval.String())
	p, err := startProc(s.name, s.bin, nil, append(env, extra...))
	if err != nil {
		return nil, err
	}
	_, err = p.waitLine(ctx, readyTimeout, func(line string) string {
		if line == riverReadyLine {
			return line
		}
		return ""
	})
	if err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// sign is the Fluxora signature: hex HMAC-SHA256(secret, ts + "." + body).
func sign(secret []byte, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "%d.", ts)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// errNotDelivered is returned by the River worker on a non-2xx answer.
var errNotDelivered = errors.New("webhook not delivered")
