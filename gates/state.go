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
	if isWrongType(err) {
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
	_, err := g.cfg.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range consumerURLs {
			keys[i] = g.keys(u)[0]
			cmds[i] = p.Get(ctx, keys[i])
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		g.metrics.redisErrors.WithLabelValues("state").Inc()
		return nil, fmt.Errorf("gates: read breaker states: %w", err)
	}
	latest := time.Now().Add(g.cfg.BreakerReset + stateSkew)
	for i, cmd := range cmds {
		raw, err := cmd.Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			out[consumerURLs[i]] = BreakerState{State: "closed"}
			continue
		case isWrongType(err):
			g.invalidState(gateBreaker, keys[i], "stored value is not a string")
			out[consumerURLs[i]] = BreakerState{State: "closed", Invalid: true}
			continue
		case err != nil:
			g.metrics.redisErrors.WithLabelValues("state").Inc()
			return nil, fmt.Errorf("gates: read breaker states: %w", err)
		}
		s, ok := parseState(raw, latest)
		if !ok {
			g.invalidState(gateBreaker, keys[i], "stored value not JSON, or out of range")
			s = BreakerState{State: "closed", Invalid: true}
		}
		out[consumerURLs[i]] = s
	}
	return out, nil
}

// isWrongType reports Redis's refusal to GET a key of another type.
func isWrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}
