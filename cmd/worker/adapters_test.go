package main

import (
	"testing"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/sender"
)

// The WEBHOOK_URL endpoint has one name everywhere: in metric labels
// (dispatcher), in headers (sender), and in the operator commands
// (endpoints).
func TestDefaultEndpointNameAgrees(t *testing.T) {
	t.Parallel()
	if dispatcher.DefaultEndpointName != endpoints.DefaultName || sender.EnvNameDefault != endpoints.DefaultName {
		t.Fatalf("dispatcher says %q, sender %q, endpoints %q", dispatcher.DefaultEndpointName, sender.EnvNameDefault, endpoints.DefaultName)
	}
}
