package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// postTo sends one delivery of seq to ep, signed with secret and naming
// endpoint name in x-fluxora-endpoint.
func postTo(client *http.Client, ep *endpoint, name string, secret []byte, seq int64) (int, error) {
	body := fmt.Appendf(nil, `{"seq":%d,"t":1}`, seq)
	req, err := http.NewRequest(http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := time.Now().Unix()
	req.Header.Set("X-Fluxora-Delivery-Id", "d")
	req.Header.Set("X-Fluxora-Event", "e")
	req.Header.Set("X-Fluxora-Attempt", "1")
	req.Header.Set("X-Fluxora-Endpoint", name)
	req.Header.Set("X-Fluxora-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Fluxora-Signature", sign(secret, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestEndpointConsumer(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			c, err := newEndpointConsumer([]string{"a", "b"}, shared)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			a, b := c.endpoints[0], c.endpoints[1]
			for _, ep := range c.endpoints {
				if !strings.HasPrefix(ep.url, "http://127.0.0.1:") {
					t.Fatalf("endpoint %s at %s, want loopback", ep.name, ep.url)
				}
			}
			if (a.url[:strings.LastIndexByte(a.url, '/')] == b.url[:strings.LastIndexByte(b.url, '/')]) != shared ||
				a.url == b.url || bytes.Equal(a.secret, b.secret) {
				t.Fatalf("urls %s %s, secrets equal %v", a.url, b.url, bytes.Equal(a.secret, b.secret))
			}
			quick := &http.Client{Timeout: 200 * time.Millisecond}
			c.reset(0, nil)
			c.count([]string{"a", "b"})
			for _, tc := range []struct {
				name   string
				ep     *endpoint
				header string
				secret []byte
				want   int
			}{
				{"own secret", a, "a", a.secret, http.StatusOK},
				{"own secret, other endpoint", b, "b", b.secret, http.StatusOK},
				{"another endpoint's secret", a, "a", b.secret, http.StatusUnauthorized},
				{"another endpoint's name", a, "b", a.secret, http.StatusBadRequest},
			} {
				if code, err := postTo(quick, tc.ep, tc.header, tc.secret, 1); err != nil || code != tc.want {
					t.Errorf("%s: %d, %v; want %d", tc.name, code, err, tc.want)
				}
			}
			if c.badSignatures.Load() != 1 || c.misrouted.Load() != 1 {
				t.Errorf("bad signatures %d, misrouted %d; want 1, 1", c.badSignatures.Load(), c.misrouted.Load())
			}
			if err := c.await(t.Context(), 1, time.Second); err != nil {
				t.Errorf("await: %v", err)
			}
			if _, err := postTo(quick, a, "a", a.secret, 1); err != nil {
				t.Fatal(err)
			}
			if s := c.snapshot(); len(s.got["a"]) != 1 || len(s.got["b"]) != 1 || s.dups != 1 {
				t.Errorf("got %v, dups %d", s.got, s.dups)
			}
		})
	}
}

func TestEndpointConsumerHangs(t *testing.T) {
	c, err := newEndpointConsumer([]string{"good", "bad"}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good, bad := c.endpoints[0], c.endpoints[1]
	c.reset(0, map[string]bool{"bad": true})
	quick := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := postTo(quick, bad, "bad", bad.secret, 1); err == nil {
		t.Error("hanging endpoint answered")
	}
	if code, err := postTo(quick, good, "good", good.secret, 1); err != nil || code != http.StatusOK {
		t.Errorf("good endpoint: %d, %v", code, err)
	}
	errc := make(chan error, 1)
	go func() { _, err := postTo(&http.Client{}, bad, "bad", bad.secret, 2); errc <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for c.snapshot().hung["bad"] < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polls a condition, with a deadline
	}
	s := c.snapshot()
	if s.hung["bad"] != 2 || s.peak["bad"] < 1 || len(s.got["bad"]) != 0 || len(s.got["good"]) != 1 {
		t.Errorf("hung %v, peak %v, got %v", s.hung, s.peak, s.got)
	}
	c.reset(0, nil)
	select {
	case err := <-errc:
		if err == nil {
			t.Error("hung request answered at reset")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hung request still waiting 5 s after reset")
	}
}

func TestMeasureEndpointModes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Two events inserted at 0 and 100 ms, each committed 1 ms later.
	commits := []commit{{seq: 0, d: time.Millisecond}, {seq: 1, d: time.Millisecond}}
	s := endpointSnapshot{
		ins: map[int64]time.Time{0: at(0), 1: at(100)},
		got: map[string]map[int64]time.Time{
			"a": {0: at(3), 1: at(104)},
			"b": {0: at(11)}, // event 1 never reached b
		},
		hung: map[string]int{noisyBad: 4}, peak: map[string]int{noisyBad: 2},
	}
	t.Run("fanout takes the last receipt of complete events", func(t *testing.T) {
		var f FanoutResult
		f.measure(s, commits, []string{"a", "b"})
		if f.Last.N != 1 || f.Last.P99 != 10*time.Millisecond || f.LastInsert.P99 != 11*time.Millisecond ||
			f.Missing != 1 || f.Incomplete != 1 || f.Each.N != 3 {
			t.Errorf("%+v", f)
		}
	})
	t.Run("noisy pools the good endpoints and names the worst", func(t *testing.T) {
		var n NoisyRun
		n.measure(s, commits, []string{"a", "b"})
		if n.Deliveries != 3 || n.After.P99 != 10*time.Millisecond || n.Worst != "b" || n.WorstP99 != 10*time.Millisecond ||
			n.Missing != 1 || n.BadHung != 4 || n.BadPeak != 2 {
			t.Errorf("%+v", n)
		}
	})
}

func TestEndpointCap(t *testing.T) {
	lines := `{"msg":"worker: serving /metrics, /healthz, /readyz","addr":"127.0.0.1:1"}
{"time":"x","level":"INFO","msg":"worker: started","batch_size":10,"concurrency":100,"endpoint_concurrency":25}`
	if got := endpointCap(lines); got != 25 {
		t.Errorf("endpointCap = %d, want 25", got)
	}
	if got := endpointCap(`{"msg":"other","endpoint_concurrency":3}`); got != 0 {
		t.Errorf("no started line: %d", got)
	}
}

func TestRunsEndpointModes(t *testing.T) {
	for _, name := range allSystems {
		sys := newSystem(name, options{tunedBatch: 100, tunedConcurrency: 200}, "worker", "self", common{name: name})
		want := name == sysWorkerDefaults || name == sysWorkerTuned || name == sysWorkerBefore || name == sysWorkerBeforeTuned ||
			name == sysWorkerTunedTraced
		for _, mode := range []string{modeNoisy, modeFanout} {
			if got := runsMode(sys, mode); got != want {
				t.Errorf("runsMode(%s, %s) = %v, want %v", name, mode, got, want)
			}
		}
	}
}

// TestEndpointSmoke runs the noisy and fanout modes once, briefly, against
// the worker (BENCH_TEST_WORKER, or built from ../cmd/worker) on the local
// PostgreSQL (BENCH_TEST_DB): every good endpoint gets every event, the bad
// one hangs and holds no more than its cap, no signature is bad.
func TestEndpointSmoke(t *testing.T) {
	_, rep := smoke(t, "-systems", sysWorkerDefaults, "-modes", modeNoisy+","+modeFanout, "-noisy-duration", "1s", "-fanout-events", "10")
	s := rep.Systems[0]
	for mode, e := range s.Errors {
		t.Errorf("mode %s: %s", mode, e)
	}
	if rep.BadSignatures != 0 || duplicates(rep) != 0 {
		t.Errorf("bad signatures %d, duplicates %d", rep.BadSignatures, duplicates(rep))
	}
	if n := s.Noisy; n == nil {
		t.Error("no noisy result")
	} else {
		for name, r := range map[string]NoisyRun{"baseline": n.Baseline, "hang": n.Hang} {
			if r.Events != noisyRate || r.Missing != 0 || r.Deliveries != noisyGood*noisyRate || r.EndpointCap < 1 {
				t.Errorf("%s: %+v", name, r)
			}
		}
		if n.Baseline.BadDelivered != noisyRate || n.Baseline.BadHung != 0 {
			t.Errorf("baseline: bad delivered %d, hung %d", n.Baseline.BadDelivered, n.Baseline.BadHung)
		}
		// Its limit grew while it answered the warm-up: hanging, it holds
		// at most what the others leave it, never their share.
		if h := n.Hang; h.BadDelivered != 0 || h.BadHung == 0 || h.EndpointCap < 1 || h.BadPeak > h.Slots-h.EndpointCap {
			t.Errorf("hang: bad delivered %d, hung %d, most open %d over slots %d less its limit's start %d",
				h.BadDelivered, h.BadHung, h.BadPeak, h.Slots, h.EndpointCap)
		}
	}
	if f := s.Fanout; f == nil || f.Events != 10 || f.Missing != 0 || f.Last.N != 10 || f.Each.N != 10*fanoutWidth {
		t.Errorf("fanout: %+v", f)
	}
	var out bytes.Buffer
	writeTable(&out, rep)
	for _, want := range []string{"NOISY", "FANOUT", "River has no endpoints", "noisy good p99 with hang", "fanout last of 100"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
