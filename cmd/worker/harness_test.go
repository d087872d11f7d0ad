package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

const testSecret = "whsec_harness_secret_value"

// delivery is one request the consumer received.
type delivery struct {
	ID, Event, Signature, Timestamp string
	Endpoint                        string // x-fluxora-endpoint
	Attempt                         int
	Status                          int // what the consumer answered; 0 while it is answering
	Body                            []byte
	At                              time.Time
	SignatureOK                     bool
	// Key and Seq are webhook-ordering-key and webhook-sequence ("" and
	// 0 without a key); Answered is when the consumer chose its status.
	Key      string
	Seq      int64
	Answered time.Time
}

// consumer is a real HTTP consumer that verifies signatures and records
// every request. respond chooses the status for each request.
type consumer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []delivery
	respond func(d delivery) int
	arrived chan delivery // every request, when non-nil (buffered)
	secret  string        // verifies signatures; testSecret unless set before the first request
	// active and peak count requests being answered at once.
	active, peak int
	// respondHeader are headers of every answer.
	respondHeader map[string]string
}

func newConsumer(t testing.TB, respond func(d delivery) int) *consumer {
	t.Helper()
	c := &consumer{respond: respond, arrived: make(chan delivery, 100000), secret: testSecret}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consumer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{
		ID: r.Header.Get("x-fluxora-delivery-id"), Event: r.Header.Get("x-fluxora-event"),
		Signature: r.Header.Get("x-fluxora-signature"), Timestamp: r.Header.Get("x-fluxora-timestamp"),
		Body: body, At: time.Now(), Endpoint: r.Header.Get("x-fluxora-endpoint"),
	}
	d.Attempt, _ = strconv.Atoi(r.Header.Get("x-fluxora-attempt"))
	d.Key = r.Header.Get("webhook-ordering-key")
	d.Seq, _ = strconv.ParseInt(r.Header.Get("webhook-sequence"), 10, 64)
	mac := hmac.New(sha256.New, []byte(c.secret))
	mac.Write([]byte(d.Timestamp + "." + string(body)))
	d.SignatureOK = hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(d.Signature)) &&
		r.Header.Get("Content-Type") == "application/json" && r.Method == http.MethodPost
	c.mu.Lock()
	c.got = append(c.got, d)
	i := len(c.got) - 1
	c.active++
	c.peak = max(c.peak, c.active)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.active--
		c.mu.Unlock()
	}()
	c.arrived <- d
	status := http.StatusOK
	if c.respond != nil {
		status = c.respond(d)
	}
	c.mu.Lock()
	if i < len(c.got) { // a benchmark may have reset got meanwhile
		c.got[i].Status, c.got[i].Answered = status, time.Now()
	}
	c.mu.Unlock()
	for k, v := range c.respondHeader {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
}

func (c *consumer) deliveries() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]delivery(nil), c.got...)
}

// byID counts requests per delivery id.
func (c *consumer) byID() map[string]int {
	out := map[string]int{}
	for _, d := range c.deliveries() {
		out[d.ID]++
	}
	return out
}

// deliveredOnceEach fails the test unless c received exactly n events, each
// exactly once.
func deliveredOnceEach(t *testing.T, c *consumer, n int) {
	t.Helper()
	ids := c.byID()
	for id, sent := range ids {
		if sent != 1 {
			t.Fatalf("delivery %s sent %d times", id, sent)
		}
	}
	if len(ids) != n {
		t.Fatalf("delivered %d distinct events, want %d", len(ids), n)
	}
}

// baseEnv is a valid configuration for db and c; overrides win.
func baseEnv(db *testdb.DB, c *consumer, overrides map[string]string) map[string]string {
	return envFor(db.URL, c, overrides)
}

// envFor is baseEnv for any database URL.
func envFor(databaseURL string, c *consumer, overrides map[string]string) map[string]string {
	env := map[string]string{
		"DATABASE_URL":             databaseURL,
		"WEBHOOK_URL":              "",
		"WEBHOOK_SECRET":           testSecret,
		"WEBHOOK_POLL_INTERVAL_MS": "60000", // anything that waits for the poll fails its test
		"WEBHOOK_BACKOFF_BASE_MS":  "20",
		"WEBHOOK_BACKOFF_MAX_MS":   "200",
		"WEBHOOK_TIMEOUT_MS":       "5000",
		"WEBHOOK_METRICS_ADDR":     "127.0.0.1:0",
		"LOG_LEVEL":                "debug",
		"WEBHOOK_SECRETS_KEY_FILE": keyFilePath(),
	}
	if c != nil {
		env["WEBHOOK_URL"] = c.srv.URL
	} else {
		delete(env, "WEBHOOK_URL")
		delete(env, "WEBHOOK_SECRET")
	}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// inProcess runs the dispatcher in this process until the test ends.
type inProcess struct {
	cancel context.CancelFunc
	done   chan int
	logs   *syncBuffer
}

func startInProcess(t testing.TB, env map[string]string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &inProcess{cancel: cancel, done: make(chan int, 1), logs: &syncBuffer{}}
	go func() { w.done <- run(ctx, nil, func(k string) string { return env[k] }, io.Discard, w.logs) }()
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			t.Logf("in-process worker logs:\n%s", w.logs.String())
		}
	})
	return w
}

// stop cancels the worker and returns its exit code.
func (w *inProcess) stop(t testing.TB) int {
	t.Helper()
	w.cancel()
	select {
	case code := <-w.done:
		w.done <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s")
		return -1
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// workerBinary builds cmd/worker once per test run.
func workerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fluxora-worker-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "worker")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("go build: %s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build worker: %v", buildErr)
	}
	return binPath
}

// process is a real worker process.
type process struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
	err  error
}

func startProcess(t *testing.T, env map[string]string, args ...string) *process {
	t.Helper()
	return startCmd(t, exec.Command(workerBinary(t), args...), env)
}

// startCmd starts cmd (the worker, or a wrapper that runs it) with exactly
// env; the test's end kills it, and prints its logs if the test failed.
func startCmd(t *testing.T, cmd *exec.Cmd, env map[string]string) *process {
	t.Helper()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &process{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("worker %d logs:\n%s", cmd.Process.Pid, p.logs.String())
		}
	})
	return p
}

// wait returns the exit code, failing the test after timeout.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("worker did not exit within %v; logs:\n%s", timeout, p.logs.String())
		return -1
	}
}

// waitProcessed waits until n rows are processed.
func waitProcessed(t *testing.T, db *testdb.DB, n int, timeout time.Duration) {
	t.Helper()
	waitfor.True(t, timeout, "rows processed", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed") >= n
	})
}

// metricsBase waits for the worker's log line naming its metrics address and
// returns the base URL.
func metricsBase(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	var base string
	waitfor.True(t, 20*time.Second, "metrics address logged", func() bool {
		m := addrRE.FindStringSubmatch(logs.String())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	})
	return base
}

// ready reports whether the worker at base answers /readyz with 200.
func ready(base string) bool {
	code, _ := httpGet(base + "/readyz")
	return code == http.StatusOK
}

// startedWorker waits for the worker's metrics address in logs and for
// /readyz, and returns the base URL.
func startedWorker(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	base := metricsBase(t, logs)
	waitfor.True(t, 20*time.Second, "worker ready", func() bool { return ready(base) })
	return base
}

// httpGet returns the status and body of a GET (status 0 on error).
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
