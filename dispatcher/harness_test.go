package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/webhook"
)

// harness is a Dispatcher running on fakes.
type harness struct {
	d          *Dispatcher
	gate       *fakeGate // when the test sets one
	reg        *prometheus.Registry
	logs       *logRecorder
	wake       chan struct{}
	cancel     context.CancelFunc // ends ctx: SIGTERM
	cancelWork context.CancelFunc // ends work: the shutdown timeout
	ran        chan error
}

// run starts a Dispatcher on st and snd; cfg's Store, Sender, Wake,
// Registerer and Logger are set here, Rand defaults to 0.5 and Now to
// fixedNow. The cleanup stops it.
func run(t *testing.T, st *fakeStore, snd *fakeSender, cfg Config) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), logs: &logRecorder{}, wake: make(chan struct{}, 1), ran: make(chan error, 1)}
	cfg.Store, cfg.Sender, cfg.Wake, cfg.Registerer, cfg.Logger = st, snd, h.wake, h.reg, slog.New(h.logs)
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0.5 }
	}
	if cfg.Now == nil {
		cfg.Now = fixedNow
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	ctx, cancel := context.WithCancel(context.Background())
	work, cancelWork := context.WithCancel(context.Background())
	h.cancel, h.cancelWork = cancel, cancelWork
	go func() { h.ran <- d.Run(ctx, work) }()
	t.Cleanup(func() {
		cancel()
		cancelWork()
		select {
		case <-h.ran:
		case <-time.After(waitTime):
			t.Errorf("Run did not return within %v of the cleanup", waitTime)
		}
	})
	return h
}

// stop ends ctx and waits for Run to return nil.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	h.waitRun(t)
}

func (h *harness) waitRun(t *testing.T) {
	t.Helper()
	select {
	case err := <-h.ran:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		h.ran <- nil // for the cleanup
	case <-time.After(waitTime):
		t.Fatalf("Run did not return within %v", waitTime)
	}
}

func (h *harness) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func waitUntil(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	waitfor.True(t, waitTime, msg, cond)
}

// metric is the value of the series of name with the given label pairs in
// reg: a counter's or gauge's value, a histogram's sample count; 0 when the
// series does not exist.
func metric(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, _ := series(t, reg, name, labels...)
	return v
}

// histSum is the sample sum of a histogram series.
func histSum(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	_, sum := series(t, reg, name, labels...)
	return sum
}

func series(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (value, sum float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), 0
			case m.Gauge != nil:
				return m.Gauge.GetValue(), 0
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), m.Histogram.GetSampleSum()
			}
		}
	}
	return 0, 0
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == pairs[i] && l.GetValue() == pairs[i+1]
		}) {
			return false
		}
	}
	return true
}

// tableRow is a row of the table endpoint "orders" (ep-1), attempt n.
func tableRow(id int64, n int) webhook.Delivery {
	return webhook.Delivery{
		ID: id, Token: [16]byte{byte(id), 0xfe}, DeliveryID: fmt.Sprintf("d-%d", id), EventType: "order.paid",
		Payload: []byte(`{"card":"payload-secret-4242"}`), Attempt: n, CreatedAt: t0.Add(-2 * time.Second),
		EndpointID: "ep-1", EndpointName: "orders", URL: "http://127.0.0.1:1/hook", Secret: "whsec-do-not-log", Enabled: true,
	}
}

// envRow is a row of the WEBHOOK_URL endpoint.
func envRow(id int64, n int) webhook.Delivery {
	r := tableRow(id, n)
	r.EndpointID, r.EndpointName, r.Secret = "", "", ""
	return r
}

// rowsOf is a batch of rows as a claim returns them.
func rowsOf(rows ...webhook.Delivery) webhook.Batch {
	return webhook.Batch{Rows: rows, Taken: len(rows)}
}
