package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// lanes is the property test's view of what is in flight and what was
// delivered, by lane (endpoint name and key).
type lanes struct {
	mu        sync.Mutex
	inFlight  map[string]int64   // lane: sequence of its row leased and not yet recorded
	delivered map[string][]int64 // lane: sequences answered 2xx, in the order recorded
	died      map[string]map[int64]bool
	// order is, by lane and kind of row (events fanned out, "e"; rows
	// written to the endpoint, "d"), the producer's number of the row each
	// sequence carries: a key's events enter every lane in the order they
	// were written, and so do a key's rows to one endpoint (an event
	// enters at its fan-out, a row to an endpoint at its insert, so the
	// two kinds interleave as the claims go).
	order map[string]map[int64]int
	errs  []string
}

func (l *lanes) claimed(r webhook.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lane := r.EndpointName + "/" + r.OrderingKey
	if seq, ok := l.inFlight[lane]; ok {
		l.errs = append(l.errs, fmt.Sprintf("lane %s: sequence %d leased while %d is in flight", lane, r.Sequence, seq))
	}
	l.inFlight[lane] = r.Sequence
	// The payload is the producer's name of the row: "e12", "d12".
	var name string
	if err := json.Unmarshal(r.Payload, &name); err != nil || len(name) < 2 {
		l.errs = append(l.errs, fmt.Sprintf("lane %s: payload %q", lane, r.Payload))
		return
	}
	n, _ := strconv.Atoi(name[1:])
	kind := lane + " (" + name[:1] + ")"
	if l.order[kind] == nil {
		l.order[kind] = map[int64]int{}
	}
	if was, ok := l.order[kind][r.Sequence]; ok && was != n {
		l.errs = append(l.errs, fmt.Sprintf("lane %s: sequence %d carries rows %d and %d", kind, r.Sequence, was, n))
	}
	l.order[kind][r.Sequence] = n
}

// inEventOrder lists, for each lane and kind of row, the sequences that do
// not follow the order in which the producer wrote their rows.
func (l *lanes) inEventOrder() []string {
	var errs []string
	for lane, bySeq := range l.order {
		seqs := slices.Sorted(maps.Keys(bySeq))
		for i := 1; i < len(seqs); i++ {
			if bySeq[seqs[i]] < bySeq[seqs[i-1]] {
				errs = append(errs, fmt.Sprintf("lane %s: sequence %d is row %d, after sequence %d, row %d",
					lane, seqs[i], bySeq[seqs[i]], seqs[i-1], bySeq[seqs[i-1]]))
			}
		}
	}
	return errs
}

// finishing frees r's lane just before its outcome is written: the next
// row of the lane may be leased only after that write commits.
func (l *lanes) finishing(r webhook.Delivery, kind webhook.Kind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lane := r.EndpointName + "/" + r.OrderingKey
	delete(l.inFlight, lane)
	switch kind {
	case webhook.Done:
		l.delivered[lane] = append(l.delivered[lane], r.Sequence)
	case webhook.Dead:
		if l.died[lane] == nil {
			l.died[lane] = map[int64]bool{}
		}
		l.died[lane][r.Sequence] = true
	}
}

// Random interleavings of producers (rows to one endpoint, events fanned
// out to two endpoints and the WEBHOOK_URL one) and three workers whose
// outcomes are random (delivered, retried at once, dead-lettered,
// released), with replays and purges of the dead letters: a lane never has
// two rows in flight, its deliveries go out in sequence order (each once,
// but for a replayed dead letter, which the lane meets again), and every
// row ends delivered or dead-lettered.
func TestOrderingRandomInterleavings(t *testing.T) {
	t.Parallel()
	interleavings(t, true)
}

// The same with only the WEBHOOK_URL endpoint (no endpoint in the table):
// the claims take the plain path (claim_plain), keyed events and all, and
// hold the same properties.
func TestOrderingRandomInterleavingsURLEndpointOnly(t *testing.T) {
	t.Parallel()
	interleavings(t, false)
}

// workerStore is a store whose sessions are the worker's
// (package dbconn): a lock wait gives up before the deadlock check,
// and the store runs the statement again. The fixture's own sessions (the
// producers', the replays') wait.
func workerStore(t *testing.T, db *testdb.DB) *outbox.Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "500ms"
	workers, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(workers.Close)
	s, err := outbox.New(workers)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// interleavings runs the random interleavings, with endpoints in the table
// (one that events target directly, two fanned out to, one of them
// 'hold') or with none.
func interleavings(t *testing.T, endpoints bool) {
	ctx := context.Background()
	_, db := setup(t)
	s := workerStore(t, db)
	replays, _ := outbox.New(db.Pool)
	direct, purged := "", "" // purged: the dead letters purged ("": all)
	if endpoints {
		direct = endpoint(t, db, "direct", true)
		endpoint(t, db, "fan-a", true)
		hold := endpoint(t, db, "fan-hold", true)
		exec(t, db, `UPDATE webhook_endpoints SET ordering = 'hold' WHERE id = $1`, hold)
		purged = "fan-hold"
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	l := &lanes{inFlight: map[string]int64{}, delivered: map[string][]int64{}, died: map[string]map[int64]bool{},
		order: map[string]map[int64]int{}}

	const keys, events = 6, 120
	var producing sync.WaitGroup
	producing.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := range events {
			key := fmt.Sprintf("k%d", rng.IntN(keys))
			if rng.IntN(3) == 0 && endpoints {
				keyed(t, db, direct, fmt.Sprint("d", i), key)
			} else {
				keyed(t, db, "", fmt.Sprint("e", i), key)
			}
			if rng.IntN(10) == 0 {
				keyed(t, db, direct, fmt.Sprint("u", i), "")
			}
		}
	})
	done, quiet := make(chan struct{}), make(chan struct{})
	var plainSeen atomic.Bool
	var working sync.WaitGroup
	for w := range 3 {
		working.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w+2)))
			for {
				select {
				case <-done:
					return
				default:
				}
				b, err := s.Claim(ctx, webhook.Query{Limit: 1 + rng.IntN(8), Lease: time.Minute, DefaultRoom: 8, Env: true})
				if err != nil {
					t.Error(err)
					return
				}
				if outbox.PlainOpen(s) {
					plainSeen.Store(true)
				}
				for _, r := range b.Rows {
					if r.OrderingKey != "" {
						l.claimed(r)
					}
				}
				rng.Shuffle(len(b.Rows), func(i, j int) { b.Rows[i], b.Rows[j] = b.Rows[j], b.Rows[i] })
				// Half the time one write for the whole batch, as the
				// completer does, else one per row.
				together := rng.IntN(2) == 0
				var batch []webhook.Outcome
				for _, r := range b.Rows {
					kind := webhook.Done
					switch n := rng.IntN(20); {
					case n < 3:
						kind = webhook.Retry
					case n < 4:
						kind = webhook.Dead
					case n < 5:
						kind = webhook.Release
					}
					if r.OrderingKey != "" {
						l.finishing(r, kind)
					}
					o := webhook.Outcome{ID: r.ID, Token: r.Token, Kind: kind, Attempt: r.Attempt, Health: webhook.Healthy,
						EndpointID: r.EndpointID, OrderingKey: r.OrderingKey, Event: r.Event}
					if kind == webhook.Retry {
						o.Attempt, o.Health = r.Attempt+1, webhook.Failing
					}
					if kind == webhook.Release {
						o.Health = webhook.NoAttempt
					}
					if batch = append(batch, o); !together {
						if _, err := s.Record(ctx, batch); err != nil {
							t.Error(err)
							return
						}
						batch = nil
					}
				}
				if len(batch) > 0 {
					if _, err := s.Record(ctx, batch); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	var replaying sync.WaitGroup
	replaying.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 9))
		for {
			select {
			case <-quiet:
				return
			case <-time.After(time.Duration(5+rng.IntN(20)) * time.Millisecond):
			}
			var err error
			if rng.IntN(3) == 0 {
				_, err = replays.PurgeDeadLetters(ctx, time.Now().Add(time.Hour), purged)
			} else {
				_, err = replays.Replay(ctx, outbox.ReplayFilter{})
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	producing.Wait()
	close(quiet)
	replaying.Wait()
	// The rest drains; the 'hold' lanes' dead letters are purged as they
	// come, or their lanes would wait for them forever.
	deadline := time.Now().Add(2 * time.Minute)
	for db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") > 0 {
		if time.Now().After(deadline) {
			t.Errorf("rows still pending after the deadline: %d", db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"))
			break
		}
		if _, err := s.PurgeDeadLetters(ctx, time.Now().Add(time.Hour), purged); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(done)
	working.Wait()

	for _, e := range append(l.errs, l.inEventOrder()...) {
		t.Error(e)
	}
	// With endpoints the plain path is never open; without, it is.
	if plainSeen.Load() == endpoints {
		t.Errorf("plain path open during the run: %v, with endpoints in the table: %v", plainSeen.Load(), endpoints)
	}
	// A lane's deliveries are in sequence order, each once; only a
	// replayed dead letter of a 'move-on' lane comes back after later ones
	// (a 'hold' lane waits for it).
	checked := 0
	for lane, seqs := range l.delivered {
		seen := map[int64]bool{}
		var last int64
		for _, seq := range seqs {
			if seen[seq] {
				t.Errorf("lane %s: sequence %d delivered twice: %v", lane, seq, seqs)
			}
			seen[seq] = true
			late := seq < last
			if late && (!l.died[lane][seq] || strings.HasPrefix(lane, "fan-hold/")) {
				t.Errorf("lane %s: sequence %d delivered after %d: %v", lane, seq, last, seqs)
			}
			last = max(last, seq)
			checked++
		}
	}
	if checked < events/2 {
		t.Errorf("only %d keyed deliveries checked", checked)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 0 {
		t.Errorf("%d rows left pending", n)
	}
}
