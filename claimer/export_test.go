package claimer

import "github.com/fluxora/webhook-worker/outbox"

// The statements, for the plan tests.
const ClaimSQL = outbox.ClaimSQL
