package endpoints

import (
	"cmp"
	"context"

	"fmt"
	"github.com/fluxora/webhook-worker/outbox"
	"strconv"
	"strings"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// The bounds of an endpoint's flow control (migration 028's checks, the
// CLI's and WEBHOOK_RATE's, WEBHOOK_RATE_BURST's and
// WEBHOOK_MAX_IN_FLIGHT's).
const (
	RateMax        = 1_000_000
	BurstMax       = 1_000_000
	MaxInFlightMax = 100_000
)

// ParseRate parses a rate as --rate and WEBHOOK_RATE take it: N/s or N/m,
// N from 1 to RateMax.
func ParseRate(s string) (n int, per time.Duration, err error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	switch unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	default:
		ok = false
	}
	n, convErr := strconv.Atoi(num)
	if !ok || convErr != nil || n < 1 || n > RateMax {
		return 0, 0, fmt.Errorf("want N/s or N/m, N from 1 to %d", RateMax)
	}
	return n, per, nil
}

// FormatFlow shows f as the list and status do: "50/s", "50/s+10" with a
// burst, "-" without a rate; and its most in flight, "-" without one.
func FormatFlow(f webhook.Flow) (rate, inFlight string) {
	rate, inFlight = cmp.Or(f.RateShown(), "-"), "-"
	if f.MaxInFlight > 0 {
		inFlight = strconv.Itoa(f.MaxInFlight)
	}
	return rate, inFlight
}

// validateFlow checks f's values, each against its flag.
func validateFlow(f webhook.Flow) error {
	switch {
	case f.Rate < 0 || f.Rate > RateMax:
		return invalid("rate", "must be from 1 to %d requests (0: no rate)", RateMax)
	case f.Rate > 0 && f.Per != time.Second && f.Per != time.Minute:
		return invalid("rate", "must be a number per second (N/s) or per minute (N/m)")
	case f.Burst < 0 || f.Burst > BurstMax:
		return invalid("burst", "must be from 0 to %d", BurstMax)
	case f.MaxInFlight < 0 || f.MaxInFlight > MaxInFlightMax:
		return invalid("max-in-flight", "must be from 1 to %d (0: no limit)", MaxInFlightMax)
	}
	return nil
}

// Flows returns every endpoint's flow control by name, and the WEBHOOK_URL
// endpoint's pause under "" while one holds.
func (s *Store) Flows(ctx context.Context) (map[string]outbox.EndpointFlow, error) {
	return s.db.EndpointFlows(ctx)
}

// LoadFlows reads the consumers' pauses and sets
// fluxora_webhook_endpoint_paused_until_seconds: a series for each endpoint
// paused now (the WEBHOOK_URL endpoint's under DefaultName), none for the
// others.
func (s *Store) LoadFlows(ctx context.Context) error {
	flows, err := s.db.EndpointFlows(ctx)
	if err != nil {
		return err
	}
	s.m.pausedUntil.Reset()
	for name, f := range flows {
		if f.PausedUntil.IsZero() {
			continue
		}
		if name == "" {
			name = DefaultName
		}
		s.m.pausedUntil.WithLabelValues(name).Set(float64(f.PausedUntil.UnixMilli()) / 1000)
	}
	return nil
}
