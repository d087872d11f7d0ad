package outbox_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// attemptAt records an attempt of the endpoint ep ("" for the WEBHOOK_URL
// endpoint) that started at at and took ms; failed with class unless "".
func attemptAt(t *testing.T, db *testdb.DB, ep string, at time.Time, ms float64, class string) {
	t.Helper()
	var id, cls any
	if ep != "" {
		id = ep
	}
	if class != "" {
		cls = class
	}
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class)
		VALUES (gen_random_uuid(), $1, 1, $2, $3, CASE WHEN $4::text IS NULL THEN 200 ELSE 503 END, $4)`, id, at, ms, cls)
}

// sampleAt writes a backlog sample of the minute at: the WEBHOOK_URL
// endpoint's (the nil uuid) and the others', by id.
func sampleAt(t *testing.T, db *testdb.DB, at time.Time, backlogs map[string]int) {
	t.Helper()
	for id, n := range backlogs {
		exec(t, db, `INSERT INTO webhook_backlog_samples (sampled_at, endpoint_id, backlog) VALUES ($1, $2, $3)`, at, id, n)
	}
}

// bucketWant is what a test expects of a bucket; the others are empty.
type bucketWant struct {
	succeeded, failed, dead int64
	p50, p99                float64 // 0: none (NULL)
	backlog                 int64   // -1: no sample (NULL)
}

// The chart's buckets hold what was inserted at known times: attempts by
// the bucket they started in (a time on a bucket's boundary in the later
// one), their percentiles, the dead letters by the time they died, and the
// highest backlog sampled; of every endpoint, of one, of the WEBHOOK_URL
// one; over an hour by the minute, a day by 15 minutes, a week by 2 hours,
// as the console reads them.
func TestChartBuckets(t *testing.T) {
	t.Parallel()
	for _, rg := range []struct {
		name   string
		bucket time.Duration
		count  int
	}{{"hour", time.Minute, 60}, {"day", 15 * time.Minute, 96}, {"week", 2 * time.Hour, 84}} {
		t.Run(rg.name, func(t *testing.T) {
			t.Parallel()
			s, db := setup(t)
			ctx := context.Background()
			a, b := endpoint(t, db, "a", true), endpoint(t, db, "b", true)
			from := time.Now().UTC().Truncate(rg.bucket).Add(-time.Duration(rg.count-1) * rg.bucket)
			at := func(i int, d time.Duration) time.Time { return from.Add(time.Duration(i)*rg.bucket + d) }
			attemptAt(t, db, a, at(0, time.Second), 10, "")
			attemptAt(t, db, a, at(0, 2*time.Second), 20, "")
			attemptAt(t, db, a, at(0, 3*time.Second), 30, "retryable")
			attemptAt(t, db, a, at(1, -time.Second), 40, "")
			attemptAt(t, db, b, at(0, 4*time.Second), 100, "")
			attemptAt(t, db, a, at(1, 0), 50, "")
			attemptAt(t, db, "", at(2, time.Second), 5, "permanent")
			attemptAt(t, db, a, at(0, -time.Second), 1, "") // before the range
			attemptAt(t, db, a, at(rg.count, 0), 1, "")     // after it
			deadLetter(t, db, uuidOf(1), a, at(2, 5*time.Second), false)
			deadLetter(t, db, uuidOf(2), "", at(rg.count-1, 0), false)
			deadLetter(t, db, uuidOf(3), a, at(rg.count, time.Second), false) // after it
			const nilID = "00000000-0000-0000-0000-000000000000"
			sampleAt(t, db, from, map[string]int{nilID: 0, a: 5, b: 7})
			sampleAt(t, db, from.Add(time.Minute), map[string]int{nilID: 0, a: 9})
			sampleAt(t, db, from.Add(-time.Minute), map[string]int{nilID: 0, a: 1000}) // before the range

			// The hour's buckets are the samples' minutes; wider ones hold both.
			byMinute := rg.bucket == time.Minute
			pick := func(hour, wider int64) int64 {
				if byMinute {
					return hour
				}
				return wider
			}
			second := pick(9, -1) // the second bucket's backlog of every endpoint
			wants := map[string]map[int]bucketWant{
				"": {
					0:            {succeeded: 4, failed: 1, p50: 30, p99: 97.6, backlog: 12},
					1:            {succeeded: 1, p50: 50, p99: 50, backlog: second},
					2:            {failed: 1, dead: 1, p50: 5, p99: 5, backlog: -1},
					rg.count - 1: {dead: 1, backlog: -1},
				},
				"a": {
					0: {succeeded: 3, failed: 1, p50: 25, p99: 39.7, backlog: pick(5, 9)},
					1: {succeeded: 1, p50: 50, p99: 50, backlog: second},
					2: {dead: 1, backlog: -1},
				},
				"b": {
					0: {succeeded: 1, p50: 100, p99: 100, backlog: 7},
					1: {backlog: pick(0, -1)},
				},
				outbox.DefaultEndpointName: {
					0:            {backlog: 0},
					1:            {backlog: pick(0, -1)},
					2:            {failed: 1, p50: 5, p99: 5, backlog: -1},
					rg.count - 1: {dead: 1, backlog: -1},
				},
			}
			for scope, want := range wants {
				got, err := s.Chart(ctx, outbox.ChartQuery{Endpoint: scope, From: from, Bucket: rg.bucket, Buckets: rg.count})
				if err != nil {
					t.Fatalf("%q: %v", scope, err)
				}
				if len(got) != rg.count {
					t.Fatalf("%q: %d buckets, want %d", scope, len(got), rg.count)
				}
				for i, k := range got {
					w, ok := want[i]
					if !ok {
						w = bucketWant{backlog: -1}
					}
					checkBucket(t, scope, i, k, at(i, 0), w)
				}
			}
			if _, err := s.Chart(ctx, outbox.ChartQuery{Endpoint: "nobody", From: from, Bucket: rg.bucket, Buckets: rg.count}); !errors.Is(err, outbox.ErrEndpointNotFound) {
				t.Fatalf("an unknown endpoint: %v", err)
			}
		})
	}
}

// checkBucket compares a bucket with what the test expects of it.
func checkBucket(t *testing.T, scope string, i int, k outbox.ChartBucket, start time.Time, w bucketWant) {
	t.Helper()
	near := func(got *float64, want float64) bool {
		if want == 0 {
			return got == nil
		}
		return got != nil && math.Abs(*got-want) < 1e-9
	}
	backlogOK := w.backlog < 0 && k.Backlog == nil || k.Backlog != nil && *k.Backlog == w.backlog
	if !k.Start.Equal(start) || k.Succeeded != w.succeeded || k.Failed != w.failed || k.DeadLettered != w.dead ||
		!near(k.P50MS, w.p50) || !near(k.P99MS, w.p99) || !backlogOK {
		t.Errorf("%q bucket %d: start %v, %d delivered, %d failed, %d dead, p50 %v, p99 %v, backlog %v; want start %v and %+v",
			scope, i, k.Start, k.Succeeded, k.Failed, k.DeadLettered, deref(k.P50MS), deref(k.P99MS), deref(k.Backlog), start, w)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// A query the chart cannot take is refused before it is sent.
func TestChartRefusesBadBuckets(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	for _, q := range []outbox.ChartQuery{
		{Bucket: 0, Buckets: 10},
		{Bucket: 1500 * time.Millisecond, Buckets: 10},
		{Bucket: time.Minute, Buckets: 0},
		{Bucket: time.Minute, Buckets: outbox.ChartBucketsMax + 1},
	} {
		if _, err := s.Chart(context.Background(), q); err == nil {
			t.Errorf("%+v: no error", q)
		}
	}
}

// The backlog's sample counts each endpoint's pending deliveries as the
// status does (due, scheduled, in flight; not the rows waiting behind their
// lane's head, nor events not fanned out), a fan-out in flight's
// deliveries included; the WEBHOOK_URL endpoint's row is written even at 0;
// samples older than 8 days go. Of eight workers sampling at once, one
// writes the minute; a second sample of the same minute writes nothing.
func TestSampleBacklog(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	a, b, c := endpoint(t, db, "a", true), endpoint(t, db, "b", true), endpoint(t, db, "c", true)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at, locked_until, lease_token, ordering_key, held) VALUES
		('e', '{}', $1, now() - interval '1 minute', NULL, NULL, NULL, false),
		('e', '{}', $1, now() - interval '1 minute', NULL, NULL, NULL, false),
		('e', '{}', $1, now() + interval '1 hour', NULL, NULL, NULL, false),
		('e', '{}', $2, now() - interval '1 minute', now() + interval '1 minute', gen_random_uuid(), NULL, false)`, a, b)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('not.fanned.out', '{}')`)
	// An event in flight owing a delivery to c and one to b (its delivery
	// to a written already).
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, fan_to, fan_done, locked_until, lease_token)
		VALUES ('e', '{}', ARRAY[$1, $2, $3]::uuid[], ARRAY[$1]::uuid[], now() + interval '1 minute', gen_random_uuid())`, a, b, c)
	exec(t, db, `INSERT INTO webhook_backlog_samples (sampled_at, endpoint_id, backlog) VALUES
		(date_trunc('minute', now()) - interval '9 days', $1, 1), (date_trunc('minute', now()) - interval '7 days', $1, 2)`, a)

	status, err := s.EndpointStatus(ctx, false, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"00000000-0000-0000-0000-000000000000": 0}
	for _, e := range status {
		if n := e.Pending + e.Scheduled + e.InFlight; n > 0 {
			want[map[string]string{"a": a, "b": b, "c": c}[e.Name]] = n
		}
	}
	if want[a] != 3 || want[b] != 2 || want[c] != 1 {
		t.Fatalf("the fixture's backlogs by the status: %v", want)
	}
	for try := 0; ; try++ {
		if try > 0 {
			exec(t, db, `DELETE FROM webhook_backlog_samples WHERE sampled_at > now() - interval '1 hour'`)
		}
		minute := dbMinute(t, db)
		var wg sync.WaitGroup
		written := make([]int64, 8)
		for i := range written {
			wg.Go(func() {
				n, err := s.SampleBacklog(ctx)
				if err != nil {
					t.Error(err)
				}
				written[i] = n
			})
		}
		wg.Wait()
		again, err := s.SampleBacklog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if dbMinute(t, db) != minute && try < 3 {
			continue // a minute began meanwhile: its sample is another's
		}
		total := int64(0)
		for _, n := range written {
			total += n
		}
		if total != int64(len(want)) || again != 0 {
			t.Fatalf("the workers wrote %v rows and then %d, want %d once", written, again, len(want))
		}
		break
	}
	rows, err := db.Pool.Query(ctx, `SELECT endpoint_id::text, backlog FROM webhook_backlog_samples WHERE sampled_at = date_trunc('minute', now())`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	if len(got) != len(want) || got[a] != want[a] || got[b] != want[b] || got[c] != want[c] {
		t.Fatalf("sampled %v, want %v", got, want)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_backlog_samples WHERE sampled_at < now() - interval '8 days'`); n != 0 {
		t.Fatalf("%d samples older than 8 days left", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_backlog_samples WHERE sampled_at < now() - interval '1 day'`); n != 1 {
		t.Fatalf("%d samples of 7 days ago, want the one kept", n)
	}
}

// dbMinute is the database's minute, as the sample takes it.
func dbMinute(t *testing.T, db *testdb.DB) time.Time {
	t.Helper()
	var m time.Time
	if err := db.Pool.QueryRow(context.Background(), `SELECT date_trunc('minute', now())`).Scan(&m); err != nil {
		t.Fatal(err)
	}
	return m
}
