package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/gates"
)

// newRedisClient is the client of the gates' Redis, the worker's and the
// operator commands' alike: every call gives up within timeout
// (boundRedisCalls). The error never contains the URL (it may hold a
// password).
func newRedisClient(redisURL string, timeout time.Duration) (*redis.Client, error) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, errors.New("REDIS_URL is not a valid redis URL")
	}
	boundRedisCalls(opt, timeout)
	return redis.NewClient(opt), nil
}

// boundRedisCalls makes every Redis call give up within timeout, whatever
// state the server is in: go-redis ignores a context deadline on the socket
// unless ContextTimeoutEnabled is set, so a paused (not down) Redis would
// otherwise hold each call for its 3 s read timeout, retried 3 times. A
// failed call fails open, so retrying it buys nothing. A dial is bounded by
// the call's context too.
func boundRedisCalls(opt *redis.Options, timeout time.Duration) {
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1 // a refused dial fails the call at once
	opt.ReadTimeout = timeout
	opt.WriteTimeout = timeout
	opt.PoolTimeout = timeout
}

// newGates builds the Redis gates; without REDIS_URL they allow everything.
func newGates(cfg config, reg prometheus.Registerer, log *slog.Logger) (*gates.Gates, func(), error) {
	gc := gates.Config{
		RetryRPS: cfg.RetryRPS, BreakerThreshold: cfg.BreakerThreshold, BreakerReset: cfg.BreakerReset,
		ProbeTTL: 2*cfg.Timeout + 5*time.Second, CallTimeout: cfg.GateTimeout, Registerer: reg, Logger: log,
	}
	closeFn := func() {}
	if cfg.RedisURL != "" {
		client, err := newRedisClient(cfg.RedisURL, cfg.GateTimeout)
		if err != nil {
			return nil, nil, err
		}
		gc.Client = client
		closeFn = func() { _ = client.Close() }
	}
	g, err := gates.New(gc)
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return g, closeFn, nil
}

// opsGates is the gates through which the operator commands read circuit
// states: the bounded client of the worker, with the operators' timeout
// (opsConfig.RedisTimeout), judging stored states by operatorBreakerReset.
// Only REDIS_URL's own problem is an error; the caller says it.
func opsGates(cfg opsConfig) (*gates.Gates, func(), error) {
	client, err := newRedisClient(cfg.RedisURL, cfg.RedisTimeout)
	if err != nil {
		return nil, nil, err
	}
	g, err := gates.New(gates.Config{Client: client, Registerer: prometheus.NewRegistry(), CallTimeout: cfg.RedisTimeout,
		BreakerReset: operatorBreakerReset})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return g, func() { _ = client.Close() }, nil
}

func gatesSummary(cfg config) string {
	if cfg.RedisURL == "" {
		return "off (REDIS_URL unset)"
	}
	if cfg.BreakerThreshold == 0 {
		return fmt.Sprintf("rate limit %d retries/s; circuit breaker off", cfg.RetryRPS)
	}
	return fmt.Sprintf("rate limit %d retries/s; circuit breaker after %d failures for %s",
		cfg.RetryRPS, cfg.BreakerThreshold, cfg.BreakerReset)
}
