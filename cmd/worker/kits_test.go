package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/producer"
	"github.com/fluxora/webhook-worker/verify"
)

// The consumer kit verifies the worker's real requests, and the producer
// kit's events are the ones delivered.
func TestKitsAgainstTheRealWorker(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	v := &verify.Verifier{Secret: []byte(testSecret)}
	var ok, bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ev, err := v.Verify(r); err != nil || ev.Type != "kit.event" || ev.Attempt != 1 {
			bad.Add(1)
			http.Error(w, "bad", http.StatusUnauthorized)
			return
		}
		ok.Add(1)
	}))
	t.Cleanup(srv.Close)
	c := &consumer{srv: srv}
	startInProcess(t, baseEnv(db, c, nil))
	for i := range 10 {
		if _, err := producer.EnqueueJSON(t.Context(), db.Pool, "kit.event", map[string]any{"i": i, "text": "ünïcode ✓"}); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.True(t, 20*time.Second, "10 verified deliveries", func() bool { return ok.Load()+bad.Load() >= 10 })
	if bad.Load() != 0 {
		t.Fatalf("%d requests failed verification", bad.Load())
	}
}
