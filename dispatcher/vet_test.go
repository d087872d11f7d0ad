package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// fakeVetter refuses the rows of refuse with its error, and records what
// it was asked.
type fakeVetter struct {
	mu     sync.Mutex
	asked  []int64
	refuse map[int64]error
}

func (v *fakeVetter) Vet(_ context.Context, r webhook.Delivery) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked = append(v.asked, r.ID)
	return v.refuse[r.ID]
}

var _ Vetter = (*fakeVetter)(nil)

// A first attempt the Vetter refuses is dead-lettered unsent, with the
// Vetter's reason and no attempt counted; one it cannot decide on is
// deferred; the others are sent; a retry is not asked about again.
func TestVetterBeforeTheFirstAttempt(t *testing.T) {
	t.Parallel()
	st := &fakeStore{}
	rows := []webhook.Delivery{tableRow(1, 1), tableRow(2, 1), tableRow(3, 1), tableRow(4, 2)}
	st.push(claimStep{batch: rowsOf(rows...)})
	refusal := errors.New("payload does not match the schema of order.paid: /card: got string, want object")
	v := &fakeVetter{refuse: map[int64]error{
		2: refusal,
		3: fmt.Errorf("%w: the catalog could not be read", ErrVetLater),
		4: refusal, // a retry: never asked
	}}
	snd := &fakeSender{}
	h := run(t, st, snd, Config{Vetter: v, MaxAttempts: 5, BackoffMax: time.Hour})
	waitUntil(t, "every outcome recorded", func() bool { return st.has(1) && st.has(2) && st.has(3) && st.has(4) })
	h.stop(t)

	got := st.outcomes(t)
	if o := got[2]; o.Kind != webhook.Dead || o.Attempt != 0 || o.Error != refusal.Error() || o.Health != "" {
		t.Errorf("refused: %+v, want dead-lettered unsent with the reason", o)
	}
	if o := got[3]; o.Kind != webhook.Defer || o.Attempt != 1 || o.Delay != NotAttemptedDelay {
		t.Errorf("undecided: %+v, want deferred by NotAttemptedDelay", o)
	}
	for _, id := range []int64{1, 4} {
		if o := got[id]; o.Kind != webhook.Done {
			t.Errorf("row %d: %+v, want delivered", id, o)
		}
	}
	if sent := snd.sentIDs(); !slices.Equal(sent, []int64{1, 4}) {
		t.Errorf("sent %v, want [1 4]", sent)
	}
	v.mu.Lock()
	asked := slices.Sorted(slices.Values(v.asked))
	v.mu.Unlock()
	if !slices.Equal(asked, []int64{1, 2, 3}) {
		t.Errorf("asked about %v, want the first attempts [1 2 3]", asked)
	}
}
