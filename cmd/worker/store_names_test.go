package main

import "github.com/fluxora/webhook-worker/outbox"

// The names the tests of the operator commands give the rows the store
// returns and the commands print (they were cmd/worker's own types before
// the statements moved to package outbox).
type (
	attempt       = outbox.Attempt
	deliveryState = outbox.DeliveryState
	deadLetter    = outbox.DeadLetter
)
