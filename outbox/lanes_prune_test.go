package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

const pruneLockKey = int64(0x70727565) // the tests' prune lock

// pruneAll walks every lane once, removing those idle for idle.
func pruneAll(t *testing.T, s *outbox.Store, idle time.Duration) int64 {
	t.Helper()
	var total int64
	var at outbox.LaneCursor
	for {
		n, next, got, err := s.PruneLanes(context.Background(), at, idle, 3, pruneLockKey)
		if err != nil || !got {
			t.Fatalf("prune: %v (lock got: %v)", err, got)
		}
		total += n
		if next == (outbox.LaneCursor{}) {
			return total
		}
		at = next
	}
}

// A lane goes only when it has nothing pending, no dead letter holds it,
// and it was untouched for the idle time; a key whose lane went goes on
// above its last sequence, never from 1 again; a lane that stays numbers
// its rows 1, 2, 3.
func TestPruneLanes(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ep := endpoint(t, db, "shop", true)
	// shop takes the rows written to it, not the events: those go to the
	// WEBHOOK_URL endpoint alone.
	exec(t, db, `UPDATE webhook_endpoints SET ordering = 'hold', event_types = '{other}' WHERE id = $1`, ep)
	for _, k := range []string{"done", "pending", "held", "busy-env"} {
		keyed(t, db, ep, k+"-1", k)
	}
	keyed(t, db, "", "env-1", "busy-env")
	got := claimAll(t, s, true)
	record(t, s, got["shop:\"done-1\""], webhook.Done)
	record(t, s, got["shop:\"held-1\""], webhook.Dead) // holds its lane ('hold')
	record(t, s, got["shop:\"busy-env-1\""], webhook.Done)
	// The WEBHOOK_URL endpoint's lane of busy-env keeps its row pending.

	if n := pruneAll(t, s, time.Hour); n != 0 {
		t.Fatalf("removed %d lanes touched within the idle time", n)
	}
	if n := pruneAll(t, s, 0); n != 2 {
		t.Fatalf("removed %d lanes, want 2 (done, and busy-env's of shop)", n)
	}
	left := db.Count(t, `SELECT count(*) FROM webhook_ordering_lanes`)
	if left != 3 {
		t.Fatalf("%d lanes left, want 3 (pending, held, busy-env of the WEBHOOK_URL endpoint)", left)
	}
	// The key goes on above its last sequence (1), whatever the floor.
	keyed(t, db, ep, "done-2", "done")
	again := claimAll(t, s, true)
	if r := again["shop:\"done-2\""]; r.Sequence <= 1 {
		t.Fatalf("after its lane went, key done numbered %d, want above 1: %v", r.Sequence, names(again))
	}
	// A lane that stays numbers its rows one after the other.
	record(t, s, got["shop:\"pending-1\""], webhook.Done)
	keyed(t, db, ep, "pending-2", "pending")
	keyed(t, db, ep, "pending-3", "pending")
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE ordering_key = 'pending' AND NOT processed AND ordering_seq IN (2, 3)`); n != 2 {
		t.Fatalf("a lane that stayed numbered its rows otherwise: %d of 2, 3", n)
	}
	// Another session holds the prune lock: nothing is done.
	conn, err := db.Pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, pruneLockKey); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, pruneLockKey) //nolint:errcheck
	if n, at, got, err := s.PruneLanes(context.Background(), outbox.LaneCursor{Endpoint: ep, Key: "a"}, 0, 10, pruneLockKey); n != 0 || got || err != nil ||
		at != (outbox.LaneCursor{Endpoint: ep, Key: "a"}) {
		t.Fatalf("with the lock held elsewhere: %d %v %v %v", n, at, got, err)
	}
}

// Producers write the same few keys at once while the lanes are pruned
// again and again (idle time 0: every lane with nothing pending goes) and
// two workers deliver: a lane never has two rows in flight, its rows are
// delivered in sequence order, each once, each producer's rows of a key in
// the order it wrote them (its events and its rows to the endpoint each,
// as an event enters a lane at its fan-out), and no sequence of a lane is
// given twice.
func TestPruneLanesWhileProducing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	s := workerStore(t, db)
	pruner, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	ep := endpoint(t, db, "shop", true)
	const producers, perProducer, keys = 3, 150, 4
	l := &lanes{inFlight: map[string]int64{}, delivered: map[string][]int64{}, died: map[string]map[int64]bool{},
		order: map[string]map[int64]int{}}
	// byProducer: lane and producer -> the producer's numbers of its rows,
	// in the order they were delivered.
	var mu sync.Mutex
	byProducer := map[string][]int{}

	var producing sync.WaitGroup
	for p := range producers {
		producing.Go(func() {
			for i := range perProducer {
				key := fmt.Sprintf("order-%d", i%keys)
				// The payload names the producer and its row: "p1-42".
				name := fmt.Sprintf("p%d-%d", p, i)
				target := ep
				if i%3 == 0 {
					target = "" // an event, fanned out to shop and the WEBHOOK_URL endpoint
				}
				keyed(t, db, target, name, key)
			}
		})
	}
	stop := make(chan struct{})
	var pruned atomic.Int64
	var background sync.WaitGroup
	background.Go(func() {
		var at outbox.LaneCursor
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, next, _, err := pruner.PruneLanes(ctx, at, 0, 2, pruneLockKey)
			if err != nil {
				t.Error(err)
				return
			}
			pruned.Add(n)
			at = next
		}
	})
	for range 2 {
		background.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := s.Claim(ctx, webhook.Query{Limit: 8, Lease: time.Minute, DefaultRoom: 8, Env: true})
				if err != nil {
					t.Error(err)
					return
				}
				var out []webhook.Outcome
				for _, r := range b.Rows {
					var name string
					if err := json.Unmarshal(r.Payload, &name); err != nil {
						t.Error(err)
						return
					}
					l.claimed(r)
					l.finishing(r, webhook.Done)
					var p, n int
					fmt.Sscanf(name, "p%d-%d", &p, &n)
					// An event enters a lane at its fan-out, a row written to
					// shop at its insert: the two kinds are in order each.
					kind := "rows"
					if n%3 == 0 {
						kind = "events"
					}
					mu.Lock()
					lane := fmt.Sprintf("%s/%s/p%d's %s", r.EndpointName, r.OrderingKey, p, kind)
					byProducer[lane] = append(byProducer[lane], n)
					mu.Unlock()
					out = append(out, webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done, Attempt: r.Attempt,
						Health: webhook.Healthy, EndpointID: r.EndpointID, OrderingKey: r.OrderingKey, Event: r.Event})
				}
				if len(out) > 0 {
					if _, err := s.Record(ctx, out); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	producing.Wait()
	// Every row ends delivered: none waits in a lane without a head.
	deadline := time.Now().Add(2 * time.Minute)
	pending := func() int { return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") }
	for pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	background.Wait()
	if n := pending(); n > 0 {
		t.Fatalf("rows still pending after the deadline: %d", n)
	}

	for _, e := range l.errs {
		t.Error(e)
	}
	if pruned.Load() == 0 {
		t.Fatal("no lane was pruned during the run")
	}
	t.Logf("lanes removed during the run: %d", pruned.Load())
	delivered := 0
	for lane, seqs := range l.delivered {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("lane %s: sequence %d delivered after %d: %v", lane, seqs[i], seqs[i-1], seqs)
			}
		}
		delivered += len(seqs)
	}
	// Every row written to shop and every event: shop's and the WEBHOOK_URL
	// endpoint's delivery each.
	events := producers * ((perProducer + 2) / 3)
	if want := producers*perProducer + events; delivered != want {
		t.Errorf("%d keyed deliveries, want %d", delivered, want)
	}
	for lane, ns := range byProducer {
		for i := 1; i < len(ns); i++ {
			if ns[i] <= ns[i-1] {
				t.Errorf("%s: the producer's row %d delivered after its row %d", lane, ns[i], ns[i-1])
			}
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM (SELECT 1 FROM webhook_outbox WHERE processed AND ordering_key IS NOT NULL AND fanout IS DISTINCT FROM 0
		GROUP BY coalesce(endpoint_id, webhook_ordering_nil()), ordering_key, ordering_seq HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d sequences given twice in a lane", n)
	}
	if n := pruneAll(t, pruner, 0); db.Count(t, `SELECT count(*) FROM webhook_ordering_lanes`) != 0 {
		t.Errorf("lanes left after a last pass (which removed %d)", n)
	}
}
