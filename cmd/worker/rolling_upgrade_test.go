package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/producer"
	"github.com/fluxora/webhook-worker/verify"
)

// previousRelease is the commit whose worker stands for the release before
// this one: the schema of migrations 001-018, before 019, 020 and 021.
const previousRelease = "938e859"

// previousWorker builds the worker of previousRelease from this checkout's
// git history into dir (go build -trimpath) and returns its path. A
// checkout without that commit (a shallow clone) fails the test.
func previousWorker(t *testing.T, dir string) string {
	t.Helper()
	if out, err := exec.Command("git", "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the previous release's commit %s is not in this checkout (%v: %s): the rolling upgrade test builds "+
			"the previous worker from git history; clone with full history (git fetch --unshallow)", previousRelease, err, out)
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	// From the top: in a subdirectory git archive takes only that one.
	archive := exec.Command("sh", "-c", `cd "$(git rev-parse --show-toplevel)" && git archive "$1" | tar -x -C "$2"`,
		"sh", previousRelease, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v: %s", previousRelease, err, out)
	}
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		t.Fatalf("git archive %s: %v", previousRelease, err)
	}
	bin := filepath.Join(dir, "worker-previous")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/worker")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the worker of %s: %v: %s", previousRelease, err, out)
	}
	return bin
}

// runCommand runs bin with args and exactly env, and returns its exit code
// and output.
func runCommand(t *testing.T, bin string, env map[string]string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// deliveredCount is the sum of a worker's deliveries_total samples of the
// outcome delivered, over its endpoints.
func deliveredCount(base string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sum float64
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, `fluxora_webhook_deliveries_total{`) || !strings.Contains(line, `outcome="delivered"`) {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		sum += f
	}
	return sum, sc.Err()
}

// deliveredAbove waits until the worker at base has delivered more than n.
func deliveredAbove(t *testing.T, who, base string, n float64) float64 {
	t.Helper()
	var v float64
	waitfor.True(t, 60*time.Second, who+" delivers", func() bool {
		got, err := deliveredCount(base)
		v = got
		return t.Failed() || err == nil && got > n // failed: the stream stopped
	})
	if t.Failed() {
		t.FailNow()
	}
	return v
}

// A rolling upgrade: the previous release's worker delivers a steady stream
// (fan-out to three endpoints, most events with an ordering key, a fifth of
// the first attempts failed); the new `worker migrate` runs under it; a new
// worker starts beside it and both deliver; the old one stops on SIGTERM
// (exit 0). When the stream ends and drains, every event reached every
// endpoint, each key's events arrived in order, one after the other's 2xx,
// with their sequence, and every signature verifies against its endpoint's
// secret.
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	oldBin := previousWorker(t, t.TempDir())
	newBin := workerBinary(t)
	db := testdb.NewEmpty(t)
	cmdEnv := map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_SECRETS_KEY_FILE": keyFilePath()}
	if code, out := runCommand(t, oldBin, cmdEnv, "migrate"); code != 0 || !strings.Contains(out, "applied migrations/018_fan_out_in_flight.sql") ||
		strings.Contains(out, "019_") {
		t.Fatalf("the previous release's migrate: exit %d\n%s", code, out)
	}

	const keys = 6
	var (
		badMu sync.Mutex
		bad   []string // signatures that did not verify
	)
	var consumers []*consumer
	for _, name := range []string{"alpha", "beta", "gamma"} {
		secret := "whsec_" + name + "_secret" // addEndpoint's
		v := &verify.Verifier{Secret: []byte(secret)}
		c := newConsumer(t, func(d delivery) int {
			if _, err := v.Check(d.Timestamp, d.Signature, d.Body); err != nil || !d.SignatureOK {
				badMu.Lock()
				bad = append(bad, fmt.Sprintf("%s: delivery %s attempt %d: %v", name, d.ID, d.Attempt, err))
				badMu.Unlock()
			}
			var ev orderedEvent
			if err := json.Unmarshal(d.Body, &ev); err != nil {
				return http.StatusBadRequest
			}
			if ev.I%5 == 2 && d.Attempt == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		addEndpoint(t, db, name, c)
		consumers = append(consumers, c)
	}
	env := endpointsOnly(db, map[string]string{"WEBHOOK_TIMEOUT_MS": "2000", "WEBHOOK_MAX_ATTEMPTS": "1000",
		"WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "50"})
	old := startCmd(t, exec.Command(oldBin), env)
	oldBase := startedWorker(t, old.logs)

	// The stream: key k's i-th event, two in three keyed, one transaction
	// each, through the producer kit.
	var (
		produced []orderedEvent
		stop     = make(chan struct{})
		stopped  = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		next := make([]int, keys)
		u, keyed := 0, 0
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ev, opts := orderedEvent{K: -1, I: u}, []producer.Option(nil)
			if n%3 != 2 {
				k := keyed % keys
				keyed++
				ev = orderedEvent{K: k, I: next[k]}
				opts = append(opts, producer.WithOrderingKey("key-"+strconv.Itoa(k)))
			}
			if _, err := producer.EnqueueJSON(context.Background(), db.Pool, "order.step", ev, opts...); err != nil {
				t.Errorf("enqueue %+v: %v", ev, err)
				return
			}
			if ev.K >= 0 {
				next[ev.K]++
			} else {
				u++
			}
			produced = append(produced, ev)
		}
	}()
	stopStream := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-stopped
	}
	t.Cleanup(stopStream)

	// The new schema under the old worker, which goes on delivering.
	before := deliveredAbove(t, "the previous worker", oldBase, 20)
	code, out := runCommand(t, newBin, cmdEnv, "migrate")
	if code != 0 || !strings.Contains(out, "applied migrations/021_internal_bounds.sql") {
		t.Fatalf("migrate under the previous worker: exit %d\n%s", code, out)
	}
	before = deliveredAbove(t, "the previous worker on the new schema", oldBase, before+20)

	// The new worker beside it; both deliver.
	next := startProcess(t, env)
	nextBase := startedWorker(t, next.logs)
	deliveredAbove(t, "the new worker", nextBase, 20)
	deliveredAbove(t, "the previous worker beside the new one", oldBase, before+20)

	// The old one replaced: SIGTERM, a clean exit; the stream goes on.
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := old.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("the previous worker exited %d on SIGTERM", code)
	}
	after, err := deliveredCount(nextBase)
	if err != nil {
		t.Fatal(err)
	}
	deliveredAbove(t, "the new worker alone", nextBase, after+20)
	stopStream()

	// Drained: every event at every endpoint, in order per key, signed.
	want := map[orderedEvent]bool{}
	for _, ev := range produced {
		want[ev] = true
	}
	for i, c := range consumers {
		waitfor.True(t, 90*time.Second, fmt.Sprintf("every event delivered to endpoint %d", i), func() bool {
			got := map[orderedEvent]bool{}
			for _, d := range c.deliveries() {
				var ev orderedEvent
				if d.Status/100 == 2 && json.Unmarshal(d.Body, &ev) == nil && want[ev] {
					got[ev] = true
				}
			}
			return len(got) == len(want)
		})
		checkOrder(t, c.deliveries(), keys)
	}
	waitfor.True(t, 30*time.Second, "no row left pending", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	// Neither worker met an error on the other's schema or rows (a write
	// the new checks refuse would be retried by the other worker, unseen
	// by the consumers).
	for who, logs := range map[string]string{"previous": old.logs.String(), "new": next.logs.String()} {
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "SQLSTATE") {
				t.Fatalf("the %s worker logged: %s", who, line)
			}
		}
	}
	badMu.Lock()
	defer badMu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d requests failed verification, the first: %s", len(bad), bad[0])
	}
	t.Logf("rolling upgrade: %d events to 3 endpoints, %d keyed", len(produced), len(produced)*2/3)
}
