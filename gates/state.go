package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// BreakerState is the shared breaker state of one consumer.
type BreakerState struct {
	State    string // "closed", "open" or "half-open"
	Failures int    // consecutive retryable failures
	ResetAt  time.Time
}

// State reads the breaker state of consumerURL, for operator tools. A
// consumer with no stored state is closed.
func (g *Gates) State(ctx context.Context, consumerURL string) (BreakerState, error) {
	if g.cfg.Client == nil {
		return BreakerState{}, errors.New("gates: Redis is not configured")
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	raw, err := g.cfg.Client.Get(ctx, g.keys(consumerURL)[0]).Bytes()
	if errors.Is(err, redis.Nil) {
		return BreakerState{State: "closed"}, nil
	}
	if err != nil {
		g.metrics.redisErrors.WithLabelValues("state").Inc()
		return BreakerState{}, fmt.Errorf("gates: read breaker state: %w", err)
	}
	var s struct {
		State    string  `json:"state"`
		Failures int     `json:"failures"`
		ResetAt  float64 `json:"resetAt"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return BreakerState{}, fmt.Errorf("gates: breaker state is not JSON: %w", err)
	}
	out := BreakerState{State: s.State, Failures: s.Failures}
	if s.ResetAt > 0 {
		out.ResetAt = time.UnixMilli(int64(s.ResetAt))
	}
	return out, nil
}
