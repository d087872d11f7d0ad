package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Percentiles summarises a set of durations: nearest-rank percentiles over
// every sample, no interpolation and no sampling.
type Percentiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// summarize sorts d in place and returns its percentiles; the zero value for
// no samples.
func summarize(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	return Percentiles{N: len(d), P50: rank(d, 50), P90: rank(d, 90), P99: rank(d, 99), Max: d[len(d)-1]}
}

// rank is the nearest-rank percentile p of sorted: the smallest sample with
// at least p% of the samples at or below it.
func rank(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100 // ceil(p/100 * n), 1-based
	return sorted[max(i, 1)-1]
}

// ms formats a duration in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f < 10:
		return fmt.Sprintf("%.2f", f)
	case f < 1000:
		return fmt.Sprintf("%.1f", f)
	default:
		return fmt.Sprintf("%.0f", f)
	}
}

// perSecond is n events over d, per second.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// dump writes one row per event to <dir>/<system>-<mode>.csv (with
// -pairs above 1, <system>-<mode>-round<N>.csv): seq, then
// milliseconds from event 0's insert start to this event's insert start,
// its commit and its receipt by the consumer.
func (r *runner) dump(mode string, s runState, commits []commit) error {
	if r.opt.dump == "" {
		return nil
	}
	name := r.sys.Name() + "-" + mode
	if r.opt.pairs > 1 {
		name += fmt.Sprintf("-round%d", r.round)
	}
	f, err := os.Create(filepath.Join(r.opt.dump, name+".csv"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "seq,insert_ms,commit_ms,receipt_ms")
	t0 := s.got[0].Inserted
	slices.SortFunc(commits, func(a, b commit) int { return cmp.Compare(a.seq, b.seq) })
	rel := func(t time.Time) float64 { return float64(t.Sub(t0)) / 1e6 }
	for _, c := range commits {
		if rc, ok := s.got[c.seq]; ok {
			fmt.Fprintf(w, "%d,%.3f,%.3f,%.3f\n", c.seq, rel(rc.Inserted), rel(rc.Inserted.Add(c.d)), rel(rc.At))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}
