package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The console's charts (queries/charts.sql): the attempts, dead letters
// and backlog by time bucket, and the backlog's sample a minute.
var (
	chartSQL         = rawStatement("chart")
	sampleBacklogSQL = rawStatement("sample_backlog")
)

// ChartBucketsMax is the most buckets a chart reads.
const ChartBucketsMax = 1000

// ChartQuery is what Chart reads.
type ChartQuery struct {
	// Endpoint is the endpoint's name (DefaultEndpointName: the
	// WEBHOOK_URL one); "": every endpoint.
	Endpoint string
	// From is where the first bucket starts.
	From time.Time
	// Bucket is each bucket's width, whole seconds.
	Bucket time.Duration
	// Buckets is how many, 1 to ChartBucketsMax.
	Buckets int
}

// ChartBucket is one bucket of a chart: the attempts that started in it,
// the dead letters that died in it, and the backlog sampled in it.
type ChartBucket struct {
	Start        time.Time `json:"start" db:"bucket_start"`
	Succeeded    int64     `json:"succeeded" db:"succeeded"`
	Failed       int64     `json:"failed" db:"failed"` // failed attempts: retried or not
	DeadLettered int64     `json:"dead_lettered" db:"dead_lettered"`
	P50MS        *float64  `json:"p50_ms" db:"p50_ms"` // nil: no attempt
	P99MS        *float64  `json:"p99_ms" db:"p99_ms"`
	// Backlog is the highest backlog sampled in the bucket; nil: no
	// sample (no worker ran).
	Backlog *int64 `json:"backlog" db:"backlog"`
}

// Chart reads q's buckets, oldest first (chart). An unknown endpoint is
// ErrEndpointNotFound.
func (s *Store) Chart(ctx context.Context, q ChartQuery) ([]ChartBucket, error) {
	if q.Bucket < time.Second || q.Bucket%time.Second != 0 || q.Buckets < 1 || q.Buckets > ChartBucketsMax {
		return nil, errors.New("chart: the bucket must be whole seconds, and 1 to 1000 of them")
	}
	args, err := s.endpointArgs(ctx, q.Endpoint)
	if err != nil {
		return nil, err
	}
	args["since"], args["until"] = q.From, q.From.Add(time.Duration(q.Buckets)*q.Bucket)
	args["bucket_s"] = int64(q.Bucket / time.Second)
	list, err := queryAll[ChartBucket](ctx, s.pool, chartSQL, args)
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	return list, nil
}

// SampleBacklog writes this minute's sample of every endpoint's backlog
// unless another worker has (sample_backlog), and deletes the samples older
// than 8 days; it returns how many rows it wrote (0: not its turn).
func (s *Store) SampleBacklog(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, sampleBacklogSQL)
	if err != nil {
		return 0, fmt.Errorf("sample backlog: %w", err)
	}
	return tag.RowsAffected(), nil
}
