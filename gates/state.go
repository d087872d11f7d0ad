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
	return g.judge(key, raw, err, time.Now().Add(g.cfg.BreakerReset+stateSkew))
}

// States is State for many consumers in one round trip (a pipeline of
// reads), for operator tools that show every endpoint: by consumer URL.
func (g *Gates) States(ctx context.Context, consumerURLs []string) (map[string]BreakerState, error) {
	out := make(map[string]BreakerState, len(consumerURLs))
	if len(consumerURLs) == 0 {
		return out, nil
	}
	if g.cfg.Client == nil {
		return nil, errors.New("gates: Redis is not configured")
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	keys := make([]string, len(consumerURLs))
	cmds := make([]*redis.StringCmd, len(consumerURLs))
	// The pipeline's own error is one of its reads': each is judged below.
	_, _ = g.cfg.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range consumerURLs {
			keys[i] = g.keys(u)[0]
			cmds[i] = p.Get(ctx, keys[i])
		}
		return nil
	})
	latest := time.Now().Add(g.cfg.BreakerReset + stateSkew)
	for i, cmd := range cmds {
		raw, err := cmd.Bytes()
		st, err := g.judge(keys[i], raw, err, latest)
		if err != nil {
			return nil, err
		}
		out[consumerURLs[i]] = st
	}
	return out, nil
}

// judge turns the read of a breaker key (its bytes and error) into its
// state: none stored is closed; a value no worker writes is closed and
// counted invalid (resetAt later than latest included); a Redis error is
// counted and returned.
func (g *Gates) judge(key string, raw []byte, err error, latest time.Time) (BreakerState, error) {
	switch {
	case errors.Is(err, redis.Nil):
		return BreakerState{State: "closed"}, nil
	case isWrongType(err):
		g.invalidState(gateBreaker, key, "stored value is not a string")
		return BreakerState{State: "closed", Invalid: true}, nil
	case err != nil:
		g.metrics.redisErrors.WithLabelValues("state").Inc()
		return BreakerState{}, fmt.Errorf("gates: read breaker state: %w", err)
	}
	s, ok := parseState(raw, latest)
	if !ok {
		g.invalidState(gateBreaker, key, "stored value not JSON, or out of range")
		return BreakerState{State: "closed", Invalid: true}, nil
	}
	return s, nil
}

// isWrongType reports Redis's refusal to GET a key of another type.
func isWrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}
