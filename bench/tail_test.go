package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestSteadyRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[len(ms)-1-i] = t0.Add(time.Duration(m) * time.Millisecond) // reversed: steadyRate sorts
		}
		return out
	}
	every := make([]int, 100)
	for i := range every {
		every[i] = i
	}
	// A slow start and a slow end outside the window do not count.
	tails := append([]int(nil), every...)
	tails[0], tails[99] = -5000, 9000
	for _, tc := range []struct {
		name   string
		ms     []int
		rate   float64
		window time.Duration
	}{
		{"one per ms", every, 1000, 80 * time.Millisecond}, // completions 10 (9 ms) to 90 (89 ms)
		{"slow start and end left out", tails, 1000, 80 * time.Millisecond},
		{"one completion", []int{5}, 0, 0},
		{"none", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate, window := steadyRate(at(tc.ms...), 0)
			if rate != tc.rate || window != tc.window {
				t.Errorf("steadyRate = %v/s over %s, want %v/s over %s", rate, window, tc.rate, tc.window)
			}
		})
	}
}

func TestSteadyRateLeavesTheRampOut(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var at []time.Time
	for ms := range 100 { // 2 per ms for the first 20 ms, then 1 per ms
		at = append(at, t0.Add(time.Duration(ms)*time.Millisecond))
		if ms < 20 {
			at = append(at, t0.Add(time.Duration(ms)*time.Millisecond))
		}
	}
	rate, window := steadyRate(at, 20*time.Millisecond)
	if rate < 999.9 || rate > 1000.1 || window != 67*time.Millisecond {
		t.Errorf("steadyRate after the ramp = %v/s over %s, want 1000/s", rate, window)
	}
	if rate, _ := steadyRate(at[:30], time.Hour); rate <= 0 {
		t.Error("a run shorter than the ramp has no rate")
	}
}

func TestProfiles(t *testing.T) {
	for _, tc := range []struct {
		p       profile
		seq     int64
		attempt int
		want    time.Duration
	}{
		{profileInstant, 37, 1, 0},
		{profileTail, 36, 1, tailService},
		{profileTail, 137, 1, tailSlow},
		{profileTail, 137, 2, tailSlow},
		{profileHang, 38, 1, tailService},
		{profileHang, 237, 1, hangForever},
		{profileHang, 237, 2, tailService},
	} {
		if got := tc.p.service(tc.seq, tc.attempt); got != tc.want {
			t.Errorf("profile %d, seq %d, attempt %d: %s, want %s", tc.p, tc.seq, tc.attempt, got, tc.want)
		}
	}
	if got := meanService(tailSlow); got != 39800*time.Microsecond {
		t.Errorf("meanService(2s) = %s, want 39.8ms", got)
	}
}

// postEvent sends one signed delivery of seq as attempt to c.
func postEvent(client *http.Client, c *consumer, seq int64, attempt int) (int, error) {
	body := fmt.Appendf(nil, `{"seq":%d,"t":1}`, seq)
	req, err := http.NewRequest(http.MethodPost, c.URL(), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := time.Now().Unix()
	req.Header.Set("X-Fluxora-Delivery-Id", "d")
	req.Header.Set("X-Fluxora-Event", "e")
	req.Header.Set("X-Fluxora-Attempt", strconv.Itoa(attempt))
	req.Header.Set("X-Fluxora-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Fluxora-Signature", sign(c.secret, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestConsumerProfiles(t *testing.T) {
	c, err := newConsumer([]byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	quick := &http.Client{Timeout: 200 * time.Millisecond}

	t.Run("tail answers after the service time", func(t *testing.T) {
		c.reset(0, profileTail)
		if code, err := postEvent(quick, c, 1, 1); err != nil || code != http.StatusOK {
			t.Fatalf("post: %d, %v", code, err)
		}
		rc := c.snapshot().got[1]
		if d := rc.Answered.Sub(rc.At); d < tailService {
			t.Errorf("answered %s after receipt, want >= %s", d, tailService)
		}
	})
	t.Run("hang leaves the first attempt unanswered, not the retry", func(t *testing.T) {
		c.reset(0, profileHang)
		if _, err := postEvent(quick, c, 37, 1); err == nil {
			t.Fatal("first attempt answered")
		}
		if code, err := postEvent(quick, c, 37, 2); err != nil || code != http.StatusOK {
			t.Fatalf("retry: %d, %v", code, err)
		}
		s := c.snapshot()
		if _, ok := s.hung[37]; !ok || len(s.got) != 1 || s.dups != 0 {
			t.Errorf("hung %v, got %v, dups %d", s.hung, s.got, s.dups)
		}
	})
	t.Run("a new run ends the hung requests of the last", func(t *testing.T) {
		c.reset(0, profileHang)
		errc := make(chan error, 1)
		go func() { _, err := postEvent(&http.Client{}, c, 137, 1); errc <- err }()
		deadline := time.Now().Add(5 * time.Second)
		for len(c.snapshot().hung) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polls a condition, with a deadline
		}
		c.reset(0, profileInstant)
		select {
		case err := <-errc:
			if err == nil {
				t.Error("hung request answered at reset")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("hung request still waiting 5 s after reset")
		}
	})
}

func TestStartedConcurrency(t *testing.T) {
	line := `{"time":"x","level":"INFO","msg":"worker: started","batch_size":10,"concurrency":100,"lease":"12s"}`
	if got := startedConcurrency(line); got != "100" {
		t.Errorf("startedConcurrency = %q", got)
	}
	if got := startedConcurrency(`{"msg":"worker: serving /metrics","concurrency":3}`); got != "" {
		t.Errorf("other line: %q", got)
	}
	if got := configuredConcurrency(tunedEnv(100, 200)); got != 200 {
		t.Errorf("configuredConcurrency(tuned) = %d", got)
	}
	if got := configuredConcurrency(nil); got != workerDefaultConcurrency {
		t.Errorf("configuredConcurrency(nil) = %d", got)
	}
}

func TestRunsMode(t *testing.T) {
	sys := func(name string) system {
		return newSystem(name, options{tunedBatch: 100, tunedConcurrency: 200}, "worker", "self", common{name: name})
	}
	for _, tc := range []struct {
		system, mode string
		want         bool
	}{
		{sysWorkerDefaults, modeTail, true},
		{sysWorkerTuned, modeTailHang, true},
		{sysWorkerDefaults, modeCost, true},
		{sysRiver200, modeTail, true},
		{sysRiver200, modeTailHang, true},
		{sysRiver200, modeDrain, false},
		{sysRiverTuned, modeTail, true},
		{sysRiverDefaults, modeTail, false},
		{sysRiverDefaults, modeDrain, true},
		{sysRiverDefaults, modeCost, false},
		{sysPollOnly, modeTailHang, false},
		{sysPollOnly, modeCost, false},
	} {
		if got := runsMode(sys(tc.system), tc.mode); got != tc.want {
			t.Errorf("runsMode(%s, %s) = %v, want %v", tc.system, tc.mode, got, tc.want)
		}
	}
}
