package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/testredis"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// firstHeld is a consumer that holds the first n requests until release is
// called and answers every later one at once.
func firstHeld(t *testing.T, n int64) (*consumer, func()) {
	t.Helper()
	ch := make(chan struct{})
	var seen atomic.Int64
	var once sync.Once
	release := func() { once.Do(func() { close(ch) }) }
	c := newConsumer(t, func(delivery) int {
		if seen.Add(1) <= n {
			<-ch
		}
		return http.StatusOK
	})
	t.Cleanup(release) // before the server's Close, which waits for handlers
	return c, release
}

// The rows of a worker killed mid-request are delivered by a worker that
// was already running, within WEBHOOK_TIMEOUT_MS + 5 s of the death: the
// lease (timeout + 2 s) expires and the survivor's sweep (every second)
// takes the rows over.
func TestDeadWorkersRowsTakenOverInTime(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c, _ := firstHeld(t, 5)
	const timeout = 2 * time.Second
	env := baseEnv(db, c, map[string]string{"WEBHOOK_TIMEOUT_MS": strconv.Itoa(int(timeout.Milliseconds()))})
	dead := startProcess(t, env)
	startedWorker(t, dead.logs)
	insertTx(t, db, 5)
	waitArrivals(t, c, 5) // all five held by the first worker
	// Frozen at once, so that neither its timeouts nor its sweep touch
	// the rows however long the survivor takes to start on a busy
	// machine; killed once the survivor runs.
	if err := dead.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	survivor := startProcess(t, env)
	base := startedWorker(t, survivor.logs)
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dead.wait(t, 10*time.Second)
	died := time.Now()
	waitProcessed(t, db, 5, 30*time.Second)
	took := time.Since(died)
	if bound := timeout + 5*time.Second; took > bound {
		t.Fatalf("the survivor delivered the dead worker's rows %v after its death (bound %v)", took, bound)
	}
	if got := len(c.byID()); got != 5 {
		t.Fatalf("delivered %d distinct events, want 5", got)
	}
	if n := metricValue(t, base, "fluxora_webhook_leases_reclaimed_total"); n != 5 {
		t.Fatalf("leases reclaimed = %v, want 5", n)
	}
	figures(t, "SIGKILL with 5 rows in flight: delivered by the running survivor %v after the death (timeout %v), lost 0",
		took.Round(time.Millisecond), timeout)
}

// A worker frozen (SIGSTOP) past its lease while a second one runs: the
// second takes the rows over and delivers them; when the first is thawed,
// its late outcomes are refused by the lease fence, counted and logged, and
// nothing is recorded twice.
func TestSIGSTOPPastLeaseIsFenced(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c, release := firstHeld(t, 5)
	env := baseEnv(db, c, map[string]string{"WEBHOOK_TIMEOUT_MS": "1000"})
	frozen := startProcess(t, env)
	frozenBase := startedWorker(t, frozen.logs)
	insertTx(t, db, 5)
	waitArrivals(t, c, 5)
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The signal is delivered asynchronously: release the requests only
	// once the process is stopped, or it may still read a response.
	waitfor.True(t, 10*time.Second, "worker stopped", func() bool { return processState(frozen.cmd.Process.Pid) == 'T' })
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = frozen.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	release() // the frozen worker's responses wait in its sockets
	second := startProcess(t, env)
	secondBase := startedWorker(t, second.logs)
	waitProcessed(t, db, 5, 30*time.Second)
	if n := metricValue(t, secondBase, "fluxora_webhook_leases_reclaimed_total"); n != 5 {
		t.Fatalf("second worker reclaimed %v leases, want 5", n)
	}
	thaw()
	waitfor.True(t, 30*time.Second, "the thawed worker's outcomes refused by the fence", func() bool {
		return metricValue(t, frozenBase, "fluxora_webhook_leases_lost_total") == 5
	})
	waitfor.True(t, 10*time.Second, "a log line for the lost leases", func() bool {
		return strings.Count(frozen.logs.String(), "lease lost") == 5
	})
	// Each event is recorded once: five processed rows, no retry row, no
	// dead letter, whatever the thawed worker's attempts ended as.
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 5 {
		t.Fatalf("%d outbox rows, want the 5 events only", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed"); n != 5 {
		t.Fatalf("%d processed, want 5", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	sent := 0
	for _, n := range c.byID() {
		sent += n
	}
	figures(t, "SIGSTOP past the lease: 5 events, %d requests, lost 0, 5 late outcomes refused by the fence", sent)
}

// SIGTERM while rows are claimed but not yet sent (their gate check is
// stuck on a frozen Redis): the worker releases them at once and exits 0;
// another worker delivers each exactly once, without waiting for a lease.
func TestSIGTERMReleasesRowsNotStarted(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	db := testdb.New(t)
	c := newConsumer(t, nil)
	env := baseEnv(db, c, map[string]string{
		"REDIS_URL":                         rs.URL(),
		"WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "1000", // every attempt is checked first
		"WEBHOOK_GATE_TIMEOUT_MS":           "10000",
		"WEBHOOK_TIMEOUT_MS":                "10000", // a lease of over 30 s
	})
	p := startProcess(t, env)
	startedWorker(t, p.logs)
	rs.Pause()
	t.Cleanup(rs.Resume)
	insertTx(t, db, 5)
	waitfor.True(t, 20*time.Second, "rows claimed", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE lease_token IS NOT NULL") == 5
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	stopping := time.Now()
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	exited := time.Since(stopping)
	if !strings.Contains(p.logs.String(), "released rows not started") {
		t.Fatalf("no release logged:\n%s", p.logs.String())
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND lease_token IS NULL AND locked_until IS NULL"); n != 5 {
		var dump []string
		rows, _ := db.Pool.Query(context.Background(), "SELECT format('%s processed=%s token=%s until=%s reclaims=%s now=%s', id, processed, lease_token, locked_until, reclaims, now()) FROM webhook_outbox")
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			dump = append(dump, line)
		}
		t.Fatalf("%d rows released, want 5:\n%s", n, strings.Join(dump, "\n"))
	}
	if got := len(c.deliveries()); got != 0 {
		t.Fatalf("the stopping worker sent %d requests", got)
	}
	rs.Resume()
	started := time.Now()
	startProcess(t, env)
	waitProcessed(t, db, 5, 20*time.Second)
	deliveredOnceEach(t, c, 5)
	figures(t, "SIGTERM with 5 rows claimed, not sent: released, exit 0 after %v; next worker delivered them in %v (lease %v), 0 duplicates",
		exited.Round(time.Millisecond), time.Since(started).Round(time.Millisecond),
		leaseFor(config{Timeout: 10 * time.Second, GateTimeout: 10 * time.Second, RedisURL: "x"}))
}

// processState is the state letter of pid in /proc/PID/stat ('T' stopped),
// or 0 when it cannot be read.
func processState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
