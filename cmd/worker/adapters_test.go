package main

import (
	"testing"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/endpoints"
)

// store.Record converts the dispatcher's kinds to the claimer's by value.
func TestOutcomeKindsMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d dispatcher.Kind
		c claimer.Kind
	}{
		{dispatcher.Done, claimer.Done},
		{dispatcher.Retry, claimer.Retry},
		{dispatcher.Defer, claimer.Defer},
		{dispatcher.Dead, claimer.Dead},
		{dispatcher.Release, claimer.Release},
	} {
		if claimer.Kind(tc.d) != tc.c {
			t.Errorf("dispatcher kind %v is claimer kind %d, want %d", tc.d, claimer.Kind(tc.d), tc.c)
		}
	}
}

// store.Record converts the dispatcher's health values to the claimer's.
func TestOutcomeHealthMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d dispatcher.Health
		c claimer.Health
	}{
		{dispatcher.NoAttempt, claimer.NoAttempt},
		{dispatcher.Healthy, claimer.Healthy},
		{dispatcher.Failing, claimer.Failing},
	} {
		if claimer.Health(tc.d) != tc.c {
			t.Errorf("dispatcher health %d is claimer health %d, want %d", tc.d, claimer.Health(tc.d), tc.c)
		}
	}
}

// The WEBHOOK_URL endpoint has one name everywhere: in headers and metric
// labels (dispatcher), and in the operator commands (endpoints).
func TestDefaultEndpointNameAgrees(t *testing.T) {
	t.Parallel()
	if dispatcher.DefaultEndpointName != endpoints.DefaultName {
		t.Fatalf("dispatcher says %q, endpoints %q", dispatcher.DefaultEndpointName, endpoints.DefaultName)
	}
}
