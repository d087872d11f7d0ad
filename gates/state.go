package gates

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BreakerState is the shared breaker state of one consumer.
type BreakerState struct {
	State    string // "closed", "open" or "half-open"
	Failures int    // consecutive retryable failures
	ResetAt  time.Time
	// Invalid says the stored state was not one a worker writes (see
	// valid.go): it is reported closed, as the workers treat it.
	Invalid bool
}

// State reads the breaker state of consumerURL, for operator tools. A
// consumer with no stored state is closed; so is one whose stored state is
// invalid (counted, and logged at warn), resetAt later than BreakerReset
// (plus a minute of clock skew) from now included.
func (g *Gates) State(ctx context.Context, consumerURL string) (BreakerState, error) {
	if g.cfg.Client == nil {
		return BreakerState{}, errors.New("gates: Redis is not configured")
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	key := g.keys(consumerURL)[0]
	raw, err := g.cfg.Client.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return BreakerState{State: "closed"}, nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
		g.invalidState(gateBreaker, key, "stored value is not a string")
		return BreakerState{State: "closed", Invalid: true}, nil
	}
	if err != nil {
		g.metrics.redisErrors.WithLabelValues("state").Inc()
		return BreakerState{}, fmt.Errorf("gates: read breaker state: %w", err)
	}
	s, ok := parseState(raw, time.Now().Add(g.cfg.BreakerReset+stateSkew))
	if !ok {
		g.invalidState(gateBreaker, key, "stored value not JSON, or out of range")
		return BreakerState{State: "closed", Invalid: true}, nil
	}
	return s, nil
}
