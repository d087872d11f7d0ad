package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// hangTimeout is T, the request timeout every system runs with in the
// tail-hang mode: a hung first attempt holds its slot this long.
const hangTimeout = 2 * time.Second

// The steady window: deliveries are counted between these fractions of the
// completions, leaving out start-up and the end of the slow tail.
const (
	steadyFrom = 10 // percent
	steadyTo   = 90 // percent
)

// TailResult is the outcome of the tail and tail-hang modes: a backlog
// drained into a consumer that takes a while to answer.
type TailResult struct {
	Rows        int           `json:"rows"`
	Slots       int           `json:"slots"`        // deliveries the system runs at once
	SlotsSource string        `json:"slots_source"` // where Slots comes from
	Timeout     time.Duration `json:"request_timeout_ns,omitempty"`
	MeanService time.Duration `json:"mean_service_ns"`
	Ideal       float64       `json:"ideal_per_second"` // Slots / MeanService
	// Steady is the deliveries per second between the 10% and 90%
	// completions (a completion is the consumer's 200), over Window.
	Steady float64       `json:"steady_per_second"`
	Window time.Duration `json:"steady_window_ns"`
	// Whole is the deliveries per second from process start to the last
	// receipt, over Elapsed.
	Whole   float64       `json:"whole_run_per_second"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Ratio   float64       `json:"ratio"` // Steady / Ideal
	// Hung counts the first attempts left unanswered (tail-hang), and
	// HungDelivered those of their events delivered on a later attempt.
	Hung          int `json:"hung"`
	HungDelivered int `json:"hung_delivered"`
	Missing       int `json:"missing"`
	Duplicates    int `json:"duplicates"`
}

// runsMode is the rule for which system runs which mode; -systems and
// -modes pick from what it allows:
//   - river-200 is there for the tail comparison: it runs the tail modes only;
//   - river-defaults and poll-only skip the tail modes, which would take
//     them far too long;
//   - cost runs on the worker systems only: the trigger is theirs;
//   - noisy, fanout and the scale modes run on the worker systems only:
//     River has no endpoints (and poll-only would measure its poll);
//   - flow, scale-limited and fanout-filter not on an earlier release's
//     binary (worker-before*): they set what only this release has.
func runsMode(sys system, mode string) bool {
	tail := mode == modeTail || mode == modeTailHang
	switch {
	case newModes[mode] && (sys.Name() == sysWorkerBefore || sys.Name() == sysWorkerBeforeTuned):
		return false
	case mode == modeNoisy || mode == modeFanout || mode == modeFlow || mode == modeFanoutFilter || slices.Contains(scaleModes, mode) || slices.Contains(orderModes, mode):
		// These set endpoints of their own and remove every other: the
		// systems beside an endpoint of the table would lose theirs.
		return sys.Worker() && sys.Name() != sysWorkerTunedIdle && sys.Name() != sysWorkerTunedDead
	case sys.Name() == sysRiver200:
		return tail
	case tail:
		return sys.Name() != sysRiverDefaults && sys.Name() != sysPollOnly
	case mode == modeCost:
		return sys.Worker()
	}
	return true
}

// newModes set flow control or payload filters, which an earlier
// release's schema does not have.
var newModes = map[string]bool{modeFlow: true, modeScaleLimited: true, modeFanoutFilter: true}

// tail drains a backlog into the consumer answering with profile prof
// (profileTail or profileHang) and compares the steady rate with the ideal,
// slots / mean service time.
func (r *runner) tail(ctx context.Context, prof profile) (*TailResult, error) {
	if err := r.sys.reset(ctx); err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	n := r.opt.tailBacklog
	if err := r.sys.insertBacklog(ctx, n); err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	var env []string
	res := &TailResult{Rows: n, MeanService: meanService(tailSlow)}
	if prof == profileHang {
		env = r.sys.hangEnv(hangTimeout)
		res.Timeout, res.MeanService = hangTimeout, meanService(hangTimeout)
	}
	r.cons.reset(0, prof)
	start := time.Now()
	p, err := r.sys.start(ctx, env)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	res.Missing, err = r.awaitAll(ctx, n, time.Minute+time.Duration(n)*10*time.Millisecond)
	if err != nil {
		return nil, err
	}
	res.Slots, res.SlotsSource = r.sys.Slots()
	res.measure(r.cons.snapshot(), start)
	return res, p.Stop()
}

// measure fills in the rates, the ideal and the hang counts from the run's
// record.
func (res *TailResult) measure(s runState, start time.Time) {
	answered := make([]time.Time, 0, len(s.got))
	for _, rc := range s.got {
		answered = append(answered, rc.Answered)
	}
	res.Steady, res.Window = steadyRate(answered, res.slow())
	res.Elapsed = s.last.Sub(start)
	res.Whole = perSecond(len(s.got), res.Elapsed)
	if res.MeanService > 0 {
		res.Ideal = float64(res.Slots) / res.MeanService.Seconds()
	}
	if res.Ideal > 0 {
		res.Ratio = res.Steady / res.Ideal
	}
	res.Hung = len(s.hung)
	for seq := range s.hung {
		if _, ok := s.got[seq]; ok {
			res.HungDelivered++
		}
	}
	res.Duplicates = s.dups
}

// slow is how long a slow request of the run takes: 2 s, or T when it hangs.
func (res *TailResult) slow() time.Duration {
	if res.Timeout > 0 {
		return res.Timeout
	}
	return tailSlow
}

// steadyRate is the deliveries per second between the steadyFrom% and
// steadyTo% completions (nearest rank, as for percentiles): the completions
// after the first of them up to the second, over the time between them.
// The window starts no earlier than ramp after the first completion: until
// the first slow requests end, no slot is held by one and every system runs
// above its steady rate. A run too short to leave a window after the ramp
// keeps the steadyFrom% start. It sorts answered in place.
func steadyRate(answered []time.Time, ramp time.Duration) (float64, time.Duration) {
	slices.SortFunc(answered, time.Time.Compare)
	n := len(answered)
	lo, hi := completion(n, steadyFrom), completion(n, steadyTo)
	if hi <= lo {
		return 0, 0
	}
	if i, _ := slices.BinarySearchFunc(answered, answered[0].Add(ramp), time.Time.Compare); i > lo && i < hi {
		lo = i
	}
	window := answered[hi].Sub(answered[lo])
	return perSecond(hi-lo, window), window
}

// completion is the 0-based index of the nearest-rank p% of n completions.
func completion(n, p int) int {
	return max((p*n+99)/100, 1) - 1
}
