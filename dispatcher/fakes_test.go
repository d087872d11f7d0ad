package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fluxora/webhook-worker/webhook"
)

// In-memory fakes of the interfaces the dispatcher declares (types.go),
// and a harness (harness_test.go) that runs a Dispatcher on them: no
// PostgreSQL, no Redis, no HTTP.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	_ Store    = (*fakeStore)(nil)
	_ Sender   = (*fakeSender)(nil)
	_ Gate     = (*fakeGate)(nil)
	_ Hush     = (*fakeHush)(nil)
	_ Disabler = (*fakeDisabler)(nil)
)

// waitTime bounds every wait: generous, since the suite runs under -race on
// a loaded 2-core machine; no test asserts a duration.
const waitTime = 10 * time.Second

// t0 is the fake clock's time; rows are made two seconds before it.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func fixedNow() time.Time { return t0 }

// claimStep is one scripted answer of fakeStore.Claim; hook, when set, runs
// inside the call, before it returns.
type claimStep struct {
	batch webhook.Batch
	err   error
	hook  func()
}

type recordCall struct {
	outcomes []webhook.Outcome
	ctxErr   error // of the context Record was called with, at the call
}

// fakeStore answers claims from a script (an empty batch once it runs out)
// and keeps every outcome written.
type fakeStore struct {
	mu      sync.Mutex
	steps   []claimStep
	queries []webhook.Query
	calls   []recordCall
	written []webhook.Outcome
	// record, when set, decides a Record call (call counts from 0); nil
	// writes every outcome.
	record       func(call int, outcomes []webhook.Outcome) ([]bool, error)
	nextDue      func() (time.Duration, bool, error)
	nextDueCalls int
}

func (s *fakeStore) push(steps ...claimStep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

func (s *fakeStore) Claim(_ context.Context, q webhook.Query) (webhook.Batch, error) {
	s.mu.Lock()
	q.Skip = slices.Clone(q.Skip)
	slices.Sort(q.Skip)
	s.queries = append(s.queries, q)
	var step claimStep
	if len(s.steps) > 0 {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	s.mu.Unlock()
	if step.hook != nil {
		step.hook()
	}
	return step.batch, step.err
}

func (s *fakeStore) Record(ctx context.Context, outcomes []webhook.Outcome) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := len(s.calls)
	s.calls = append(s.calls, recordCall{outcomes: slices.Clone(outcomes), ctxErr: ctx.Err()})
	written := make([]bool, len(outcomes))
	for i := range written {
		written[i] = true
	}
	var err error
	if s.record != nil {
		written, err = s.record(call, outcomes)
	}
	if err == nil {
		for i, o := range outcomes {
			if written[i] {
				s.written = append(s.written, o)
			}
		}
	}
	return written, err
}

func (s *fakeStore) NextDue(context.Context) (time.Duration, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextDueCalls++
	if s.nextDue == nil {
		return 0, false, nil
	}
	return s.nextDue()
}

// outcomes returns the written outcomes by row id; a row written twice
// fails the test.
func (s *fakeStore) outcomes(t *testing.T) map[int64]webhook.Outcome {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[int64]webhook.Outcome{}
	for _, o := range s.written {
		if _, dup := m[o.ID]; dup {
			t.Errorf("row %d: outcome written twice", o.ID)
		}
		m[o.ID] = o
	}
	return m
}

func (s *fakeStore) has(ids ...int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !slices.ContainsFunc(s.written, func(o webhook.Outcome) bool { return o.ID == id }) {
			return false
		}
	}
	return true
}

func (s *fakeStore) recordCalls() []recordCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *fakeStore) claimQueries() []webhook.Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

func (s *fakeStore) stepsLeft() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

func (s *fakeStore) dueCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextDueCalls
}

// fakeSender answers with fn (delivered 200 when nil) and keeps the ids of
// the rows it was asked to send.
type fakeSender struct {
	mu   sync.Mutex
	sent []int64
	fn   func(ctx context.Context, r webhook.Delivery) webhook.Result
}

func (s *fakeSender) Send(ctx context.Context, r webhook.Delivery) webhook.Result {
	s.mu.Lock()
	s.sent = append(s.sent, r.ID)
	s.mu.Unlock()
	if s.fn == nil {
		return webhook.Result{Class: webhook.Delivered, Status: 200}
	}
	return s.fn(ctx, r)
}

func (s *fakeSender) sentIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Clone(s.sent)
	slices.Sort(ids)
	return ids
}

// blocking makes a sender whose sends report on started and hang until
// release is closed (delivered 200) or their context ends (retryable).
func blocking() (s *fakeSender, started chan int64, release chan struct{}) {
	started, release = make(chan int64, 100), make(chan struct{})
	s = &fakeSender{fn: func(ctx context.Context, r webhook.Delivery) webhook.Result {
		started <- r.ID
		select {
		case <-release:
			return webhook.Result{Class: webhook.Delivered, Status: 200}
		case <-ctx.Done():
			return webhook.Result{Class: webhook.Retryable, Error: ctx.Err().Error()}
		}
	}}
	return s, started, release
}

// receive waits for n values of ch and returns them sorted.
func receive(t *testing.T, ch <-chan int64, n int) []int64 {
	t.Helper()
	var got []int64
	deadline := time.After(waitTime)
	for len(got) < n {
		select {
		case id := <-ch:
			got = append(got, id)
		case <-deadline:
			t.Fatalf("waited %v for %d sends, saw %v", waitTime, n, got)
		}
	}
	slices.Sort(got)
	return got
}

type gateRecord struct {
	id    int64
	class webhook.Class
	probe bool
}

// fakeGate decides with decide and keeps what it was asked and told.
type fakeGate struct {
	decide   func(ctx context.Context, r webhook.Delivery) Decision
	mu       sync.Mutex
	checked  []int64
	recorded []gateRecord
}

func (g *fakeGate) Check(ctx context.Context, r webhook.Delivery) Decision {
	g.mu.Lock()
	g.checked = append(g.checked, r.ID)
	g.mu.Unlock()
	return g.decide(ctx, r)
}

func (g *fakeGate) Record(_ context.Context, r webhook.Delivery, c webhook.Class, probe bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.recorded = append(g.recorded, gateRecord{r.ID, c, probe})
}

func (g *fakeGate) seen() (checked []int64, recorded []gateRecord) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.checked), slices.Clone(g.recorded)
}

type fakeHush struct {
	mu    sync.Mutex
	sets  []bool
	helps int
}

func (h *fakeHush) Set(busy bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sets = append(h.sets, busy)
}

func (h *fakeHush) Help() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.helps++
}

func (h *fakeHush) seen() ([]bool, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sets), h.helps
}

type fakeDisabler struct {
	mu    sync.Mutex
	calls [][2]string // endpoint id, reason
	err   error
}

func (f *fakeDisabler) Disable(_ context.Context, id, reason string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, [2]string{id, reason})
	return 3, f.err
}

func (f *fakeDisabler) seen() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// logRecorder is a slog handler that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = fmt.Sprint(a.Value.Any())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, rec)
	return nil
}

// find returns the records whose message contains part.
func (l *logRecorder) find(part string) []logRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRec
	for _, r := range l.recs {
		if strings.Contains(r.msg, part) {
			out = append(out, r)
		}
	}
	return out
}

// mentions reports whether any record's message or attribute holds s.
func (l *logRecorder) mentions(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if strings.Contains(r.msg, s) {
			return true
		}
		for _, v := range r.attrs {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}
