package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/pgcluster"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// resumeBound is the promise: delivery resumes within this time of a
// standby's promotion.
const resumeBound = 10 * time.Second

// A primary turns read-only while the worker's connections to it stay
// open (a demotion; here default_transaction_read_only and a reload): the
// worker drops every connection it has to it, the listener's and the
// hush's too, /readyz is 503 while it takes no writes, and the worker
// stays up. Once it takes writes again, /readyz is 200 and every event is
// delivered: those delivered before, three answered while it was
// read-only (their outcomes could not be written), and ten written
// meanwhile by a session allowed to write.
func TestPrimaryTurnsReadOnly(t *testing.T) {
	t.Parallel()
	cl := pgcluster.Start(t)
	dbURL := cl.URL("postgres")
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	c := newConsumer(t, func(d delivery) int {
		if bytes.Contains(d.Body, []byte(`"held"`)) {
			<-hold
		}
		return http.StatusOK
	})
	env := envFor(dbURL, c, map[string]string{"WEBHOOK_TIMEOUT_MS": "2000"})
	if code := startProcess(t, env, "migrate").wait(t, 30*time.Second); code != 0 {
		t.Fatalf("migrate exit %d", code)
	}
	p := startProcess(t, env)
	base := startedWorker(t, p.logs)
	admin := connect(t, dbURL)
	// The admin's session may write whatever the server's default.
	mustExec(t, admin, "SET default_transaction_read_only = off")
	insert := func(key string, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			mustExec(t, admin, "INSERT INTO webhook_outbox (event_type, payload) VALUES ('e', $1)", fmt.Sprintf(`{"%s":%d}`, key, i))
		}
	}
	insert("i", 0, 20)
	waitfor.True(t, 10*time.Second, "first 20 delivered", func() bool { return len(c.byID()) == 20 })
	insert("held", 0, 3)
	waitfor.True(t, 10*time.Second, "3 requests in flight", func() bool { return len(c.byID()) == 23 })
	before := workerSessions(t, admin, 0)
	if len(before) < 2 {
		t.Fatalf("worker sessions %v: want the listener's and the pool's at least", before)
	}

	mustExec(t, admin, "ALTER SYSTEM SET default_transaction_read_only = on")
	mustExec(t, admin, "SELECT pg_reload_conf()")
	flipped := time.Now()
	waitfor.True(t, 20*time.Second, "/readyz 503 while the server is read-only", func() bool { return !ready(base) })
	unready := time.Since(flipped)
	release() // answered while read-only: their outcomes cannot be written
	waitfor.True(t, 20*time.Second, "every session the worker had on the read-only server dropped", func() bool {
		return !slices.ContainsFunc(workerSessions(t, admin, 0), func(pid int32) bool { return slices.Contains(before, pid) })
	})
	dropped := time.Since(flipped)
	insert("i", 20, 10) // committed by a session that may write, claimed once the worker may
	// The worker keeps trying: each claim, on a new connection to the same
	// read-only server, is refused and drops it again; the outcomes of the
	// three requests answered meanwhile fail to be written.
	waitfor.True(t, 20*time.Second, "claims and outcome writes refused again", func() bool {
		return metricValue(t, base, `fluxora_webhook_database_resets_total{reason="read_only"}`) >= 2 &&
			metricValue(t, base, "fluxora_webhook_commit_errors_total") >= 1
	})
	if code, body := httpGet(base + "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d %q while the server is read-only", code, body)
	}

	mustExec(t, admin, "ALTER SYSTEM RESET default_transaction_read_only")
	mustExec(t, admin, "SELECT pg_reload_conf()")
	writable := time.Now()
	waitfor.True(t, 20*time.Second, "/readyz 200 once the server takes writes", func() bool { return ready(base) })
	readyAgain := time.Since(writable)
	waitfor.True(t, 20*time.Second, "the 10 events written meanwhile delivered", func() bool { return len(c.byID()) == 33 })
	waitfor.True(t, 30*time.Second, "every row processed", func() bool { return pendingRows(t, admin) == 0 })
	select {
	case <-p.done:
		t.Fatalf("the worker exited: %v", p.err)
	default:
	}
	resets := metricValue(t, base, `fluxora_webhook_database_resets_total{reason="read_only"}`)
	if resets < 1 {
		t.Fatal("no reset counted for the read-only server")
	}
	requests := len(c.deliveries())
	figures(t, "/readyz 503 after %v, old sessions dropped after %v, 200 %v after writable; 33 events, %d requests (%d duplicates), %v resets, lost 0",
		unready.Round(time.Millisecond), dropped.Round(time.Millisecond), readyAgain.Round(time.Millisecond),
		requests, requests-33, resets)
}

// A failover as managed PostgreSQL makes it: a primary with a synchronous
// standby, two workers and two producers on a multi-host URL with
// target_session_attrs=read-write; the primary stopped in immediate mode
// mid-stream (a crash) and the standby promoted; then the old primary
// rewound and back as a standby of the new one. Every event whose commit
// was acknowledged is delivered; delivery resumes within resumeBound of
// the promotion; both workers stay up, 503 while no host takes writes, 200
// after, listening on the new primary, with no session left on the old
// one. Duplicates are only of events first sent just before the crash,
// whose outcomes were lost with it.
func TestFailoverToSynchronousStandby(t *testing.T) {
	t.Parallel()
	primary := pgcluster.Start(t)
	standby := primary.Standby()
	url := pgcluster.FailoverURL("postgres", primary, standby)
	c := newConsumer(t, nil)
	env := envFor(url, c, map[string]string{"WEBHOOK_TIMEOUT_MS": "2000"})
	if code := startProcess(t, env, "migrate").wait(t, 30*time.Second); code != 0 {
		t.Fatalf("migrate exit %d", code)
	}
	workers := []*process{startProcess(t, env), startProcess(t, env)}
	bases := []string{startedWorker(t, workers[0].logs), startedWorker(t, workers[1].logs)}
	prod := startProducers(t, url, 2)

	// Long enough a stream that events first sent well before the crash
	// exist, which must not be sent again.
	waitfor.True(t, 30*time.Second, "4 s of deliveries", func() bool {
		d := c.deliveries()
		return len(d) >= 100 && time.Since(d[0].At) > 4*time.Second
	})
	crashed := time.Now()
	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	for _, base := range bases {
		waitfor.True(t, 20*time.Second, "/readyz 503 while no host takes writes", func() bool { return !ready(base) })
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	var resumed, newDelivered time.Duration
	waitfor.True(t, 3*resumeBound, "a delivery after the promotion", func() bool {
		d := c.deliveries()
		i := slices.IndexFunc(d, func(d delivery) bool { return d.At.After(promoted) })
		if i >= 0 {
			resumed = d[i].At.Sub(promoted)
		}
		return i >= 0
	})
	if resumed > resumeBound {
		t.Fatalf("delivery resumed %v after the promotion, want within %v", resumed, resumeBound)
	}
	waitfor.True(t, 3*resumeBound, "an event written to the new primary delivered", func() bool {
		first := prod.firstAckedAfter(promoted)
		for _, d := range c.deliveries() {
			if n, ok := eventNumber(d); ok && n >= first {
				newDelivered = d.At.Sub(promoted)
				return true
			}
		}
		return false
	})
	for _, base := range bases {
		waitfor.True(t, 20*time.Second, "/readyz 200 after the promotion", func() bool { return ready(base) })
	}
	newPrimary := connect(t, standby.URL("postgres"))
	waitfor.True(t, 10*time.Second, "both workers' listeners on the new primary", func() bool {
		return sessionCount(t, newPrimary, "fluxora-webhook-listener") == 2
	})
	waitfor.True(t, 30*time.Second, "100 events acknowledged by the new primary", func() bool {
		return prod.ackedAfter(promoted) >= 100
	})

	primary.Rejoin(standby) // the old primary, rewound, streams from the new one
	rejoined := time.Now()
	waitfor.True(t, 30*time.Second, "50 events acknowledged since the rejoin", func() bool { return prod.ackedAfter(rejoined) >= 50 })
	prod.stop()
	acked, unknown := prod.outcome()
	waitfor.True(t, 30*time.Second, "every acknowledged event delivered", func() bool {
		got := producedDelivered(c)
		return !slices.ContainsFunc(acked, func(n int) bool { return got[n] == 0 })
	})
	waitfor.True(t, 30*time.Second, "every row processed on the new primary", func() bool { return pendingRows(t, newPrimary) == 0 })

	got := producedDelivered(c)
	duplicates := 0
	for n, sent := range got {
		if !slices.Contains(acked, n) && !slices.Contains(unknown, n) {
			t.Fatalf("event %d delivered, never written", n)
		}
		if sent > 1 {
			duplicates += sent - 1
			if first := firstSent(c, n); first.Before(crashed.Add(-3*time.Second)) || first.After(promoted) {
				t.Errorf("event %d sent %d times, first %v after the crash: only events in flight at the crash may be sent again",
					n, sent, first.Sub(crashed))
			}
		}
	}
	for i, w := range workers {
		select {
		case <-w.done:
			t.Fatalf("worker %d exited: %v", i, w.err)
		default:
		}
		waitfor.True(t, 10*time.Second, "ready with the old primary back as a standby", func() bool { return ready(bases[i]) })
	}
	old := connect(t, primary.URL("postgres"))
	if n := len(workerSessions(t, old, 2*time.Second)); n != 0 {
		t.Fatalf("%d worker sessions on the old primary, now a standby", n)
	}
	figures(t, "resumed %v after the promotion, first event written to the new primary delivered %v after it; %d events (%d of unknown outcome), %d duplicates",
		resumed.Round(time.Millisecond), newDelivered.Round(time.Millisecond), len(acked), len(unknown), duplicates)
}

// producers insert events {"p":N} through a URL, each in a transaction of
// its own, every 10 ms each, reconnecting after any error. An insert whose
// commit was acknowledged is acked; one cut off by the crash is of unknown
// outcome (it may or may not have committed).
type producers struct {
	next    atomic.Int64
	mu      sync.Mutex
	acked   map[int]time.Time
	unknown []int
	done    chan struct{}
	wg      sync.WaitGroup
	stopped sync.Once
}

func startProducers(t *testing.T, url string, n int) *producers {
	p := &producers{acked: map[int]time.Time{}, done: make(chan struct{})}
	for range n {
		p.wg.Add(1)
		go p.run(url)
	}
	t.Cleanup(p.stop)
	return p
}

func (p *producers) run(url string) {
	defer p.wg.Done()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if conn == nil {
			conn, _ = pgx.Connect(ctx, url)
		}
		if conn != nil {
			p.insert(ctx, conn)
			if conn.IsClosed() {
				conn = nil
			}
		}
		cancel()
	}
}

func (p *producers) insert(ctx context.Context, conn *pgx.Conn) {
	n := int(p.next.Add(1))
	_, err := conn.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload) VALUES ('e', $1)", fmt.Sprintf(`{"p":%d}`, n))
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.unknown = append(p.unknown, n)
		conn.Close(ctx)
		return
	}
	p.acked[n] = time.Now()
}

func (p *producers) stop() {
	p.stopped.Do(func() { close(p.done) })
	p.wg.Wait()
}

// outcome lists the acknowledged events and those of unknown outcome.
func (p *producers) outcome() (acked, unknown []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := range p.acked {
		acked = append(acked, n)
	}
	return acked, slices.Clone(p.unknown)
}

// ackedAfter counts the events acknowledged after t.
func (p *producers) ackedAfter(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.acked {
		if at.After(t) {
			n++
		}
	}
	return n
}

// firstAckedAfter is the lowest number of an event acknowledged after t
// (a very large one while there is none): any event numbered from it was
// written after t.
func (p *producers) firstAckedAfter(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := int(^uint(0) >> 1)
	for n, at := range p.acked {
		if at.After(t) {
			first = min(first, n)
		}
	}
	return first
}

// eventNumber is a producer's event number from a delivery's body.
func eventNumber(d delivery) (int, bool) {
	var ev struct{ P *int }
	if json.Unmarshal(d.Body, &ev) != nil || ev.P == nil {
		return 0, false
	}
	return *ev.P, true
}

// producedDelivered counts the requests per producer event.
func producedDelivered(c *consumer) map[int]int {
	out := map[int]int{}
	for _, d := range c.deliveries() {
		if n, ok := eventNumber(d); ok {
			out[n]++
		}
	}
	return out
}

// firstSent is when the consumer first received event n.
func firstSent(c *consumer, n int) time.Time {
	for _, d := range c.deliveries() {
		if m, ok := eventNumber(d); ok && m == n {
			return d.At
		}
	}
	return time.Time{}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// workerSessions are the backends of worker processes (the pool's, the
// listener's, the hush's) on conn's server that started at least minAge
// ago.
func workerSessions(t *testing.T, conn *pgx.Conn, minAge time.Duration) []int32 {
	t.Helper()
	var pids []int32
	err := conn.QueryRow(context.Background(), `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
		WHERE application_name LIKE 'fluxora-webhook-%' AND backend_start < now() - $1::interval`, minAge.String()).Scan(&pids)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// sessionCount counts the sessions of one application_name on conn's server.
func sessionCount(t *testing.T, conn *pgx.Conn, applicationName string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", applicationName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func pendingRows(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM webhook_outbox WHERE NOT processed").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
