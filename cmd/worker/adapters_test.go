package main

import (
	"testing"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/endpoints"
)

// The WEBHOOK_URL endpoint has one name everywhere: in headers and metric
// labels (dispatcher), and in the operator commands (endpoints).
func TestDefaultEndpointNameAgrees(t *testing.T) {
	t.Parallel()
	if dispatcher.DefaultEndpointName != endpoints.DefaultName {
		t.Fatalf("dispatcher says %q, endpoints %q", dispatcher.DefaultEndpointName, endpoints.DefaultName)
	}
}
