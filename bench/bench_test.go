package main

import (
	"bytes"
	"cmp"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs every mode once, with tiny counts, against the worker
// (built from ../cmd/worker, or BENCH_TEST_WORKER when set) on the local
// PostgreSQL (BENCH_TEST_DB, default the -db default). The endpoint modes
// have their own, TestEndpointSmoke.
func TestSmoke(t *testing.T) {
	opt, rep := smoke(t,
		"-systems", sysWorkerDefaults, "-modes", strings.Join(slices.DeleteFunc(slices.Clone(allModes),
			func(m string) bool { return m == modeNoisy || m == modeFanout }), ","), "-events", "20", "-poll-events", "2", "-retry-events", "10",
		"-backlog", "300", "-tail-backlog", "300", "-duration", "300ms", "-producers", "4", "-cost-pairs", "1", "-cost-duration", "300ms",
	)
	if len(rep.Systems) != 1 {
		t.Fatalf("got %d systems, want 1", len(rep.Systems))
	}
	s := rep.Systems[0]
	for mode, e := range s.Errors {
		t.Errorf("mode %s: %s", mode, e)
	}
	if rep.BadSignatures != 0 {
		t.Errorf("bad signatures: %d", rep.BadSignatures)
	}
	t.Run("every mode reports every event", func(t *testing.T) {
		if s.Latency == nil || s.Latency.Missing != 0 || s.Latency.Latency.N != 20 {
			t.Errorf("latency: %+v", s.Latency)
		}
		if s.Drain == nil || s.Drain.Missing != 0 || s.Drain.PerSecond <= 0 || s.Drain.PeakRSS <= 0 {
			t.Errorf("drain: %+v", s.Drain)
		}
		if s.Burst == nil || s.Burst.Missing != 0 || s.Burst.Inserted == 0 || s.Burst.Latency.N != s.Burst.Inserted {
			t.Errorf("burst: %+v", s.Burst)
		}
		if s.Cost == nil || len(s.Cost.On) != 1 || len(s.Cost.Off) != 1 || s.Cost.Ratio <= 0 {
			t.Errorf("cost: %+v", s.Cost)
		}
		if s.Retry == nil || s.Retry.Missing != 0 || s.Retry.Lateness.N != 10 || s.Retry.Early != 0 {
			t.Errorf("retry: %+v", s.Retry)
		}
		for mode, tr := range map[string]*TailResult{modeTail: s.Tail, modeTailHang: s.TailHang} {
			if tr == nil || tr.Missing != 0 || tr.Steady <= 0 || tr.Whole <= 0 || tr.Ideal <= 0 || tr.Slots < 1 {
				t.Errorf("%s: %+v", mode, tr)
			}
		}
		if h := s.TailHang; h != nil && (h.Hung != 300/slowEvery || h.HungDelivered != h.Hung || h.Timeout != hangTimeout) {
			t.Errorf("tail-hang: %d hung, %d of them delivered, timeout %s; want %d, all, %s",
				h.Hung, h.HungDelivered, h.Timeout, 300/slowEvery, hangTimeout)
		}
	})
	t.Run("table shows every section and the targets", func(t *testing.T) {
		var out bytes.Buffer
		writeTable(&out, rep)
		for _, want := range []string{"LATENCY", "DRAIN", "BURST", "PRODUCER COST", "RETRY", "TAIL ", "TAIL-HANG", "TARGETS", "bad signatures: 0"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, out.String())
			}
		}
	})
	t.Run("databases are dropped", func(t *testing.T) {
		dbs, err := openDatabases(t.Context(), opt.db)
		if err != nil {
			t.Fatal(err)
		}
		defer dbs.Close()
		if !strings.HasPrefix(s.Database, dbPrefix) {
			t.Fatalf("database %q lacks the prefix %q", s.Database, dbPrefix)
		}
		var n int
		if err := dbs.admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1",
			s.Database).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still exists", s.Database)
		}
	})
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n             int
		p50, p99, max time.Duration
	}{
		{"one sample", 1, 1, 1, 1},
		{"hundred samples", 100, 50, 99, 100},
		{"thousand samples", 1000, 500, 990, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := make([]time.Duration, tc.n)
			for i := range d {
				d[len(d)-1-i] = time.Duration(i + 1) // reversed: summarize sorts
			}
			p := summarize(d)
			if p.N != tc.n || p.P50 != tc.p50 || p.P99 != tc.p99 || p.Max != tc.max {
				t.Errorf("got %+v", p)
			}
		})
	}
	if p := summarize(nil); p.N != 0 {
		t.Errorf("empty: %+v", p)
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("4242 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 8 0 100 200 300")
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 2*time.Second {
		t.Errorf("parseStatCPU = %v, %v; want 2s", cpu, err)
	}
	status := []byte("Name:\tworker\nVmPeak:\t  9000 kB\nVmHWM:\t   2048 kB\nVmRSS:\t 1024 kB\n")
	rss, err := parseStatusKB(status, "VmHWM:")
	if err != nil || rss != 2048*1024 {
		t.Errorf("parseStatusKB = %d, %v; want %d", rss, err, 2048*1024)
	}
	if _, err := parseStatusKB(status, "VmSwap:"); err == nil {
		t.Error("missing key: no error")
	}
}

func TestPick(t *testing.T) {
	got, err := pick("-modes", "retry, latency", allModes)
	if err != nil || strings.Join(got, ",") != "latency,retry" {
		t.Errorf("pick = %v, %v", got, err)
	}
	if _, err := pick("-modes", "latency,nope", allModes); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown mode: %v", err)
	}
	if _, err := pick("-modes", " , ", allModes); err == nil {
		t.Error("empty list: no error")
	}
}

func TestMetricsAddr(t *testing.T) {
	line := `{"time":"x","level":"INFO","msg":"worker: serving /metrics, /healthz, /readyz","addr":"127.0.0.1:4321"}`
	if got := metricsAddr(line); got != "127.0.0.1:4321" {
		t.Errorf("metricsAddr = %q", got)
	}
	if got := metricsAddr(`{"msg":"worker: started","addr":"x"}`); got != "" {
		t.Errorf("other line: %q", got)
	}
}

func TestConsumerVerifies(t *testing.T) {
	secret := []byte("s3cret")
	c := &consumer{secret: secret}
	c.reset(0, profileInstant)
	body := []byte(`{"seq":7,"t":1}`)
	post := func(sig string, ts int64) int {
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		req.Header.Set("X-Fluxora-Delivery-Id", "d")
		req.Header.Set("X-Fluxora-Event", "e")
		req.Header.Set("X-Fluxora-Attempt", "1")
		req.Header.Set("X-Fluxora-Timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("X-Fluxora-Signature", sig)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		return w.Code
	}
	now := time.Now().Unix()
	if code := post(sign(secret, now, body), now); code != http.StatusOK {
		t.Errorf("good signature: %d", code)
	}
	if code := post(sign([]byte("other"), now, body), now); code != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", code)
	}
	if code := post(sign(secret, now-600, body), now-600); code != http.StatusUnauthorized {
		t.Errorf("stale timestamp: %d", code)
	}
	if n := c.badSignatures.Load(); n != 2 {
		t.Errorf("bad signatures = %d, want 2", n)
	}
	if s := c.snapshot(); len(s.got) != 1 || s.got[7].Inserted.UnixNano() != 1 {
		t.Errorf("recorded %+v", s.got)
	}
	c.reset(0, profileFailFirst)
	if code := post(sign(secret, now, body), now); code != http.StatusServiceUnavailable {
		t.Errorf("failFirst, attempt 1: %d", code)
	}
}

// smoke parses args, with the worker of BENCH_TEST_WORKER (else built from
// ../cmd/worker), runs them on BENCH_TEST_DB (else the default server) and
// returns the options and the report; a flag or run error fails the test.
// The smoke tests of the modes share it.
func smoke(t *testing.T, args ...string) (options, *report) {
	t.Helper()
	opt, err := parseFlags(append(args, "-worker", os.Getenv("BENCH_TEST_WORKER")), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	opt.db = cmp.Or(os.Getenv("BENCH_TEST_DB"), opt.db)
	var log bytes.Buffer
	rep, err := benchmark(t.Context(), opt, &log)
	if err != nil {
		t.Fatalf("benchmark: %v\n%s", err, log.String())
	}
	return opt, rep
}
