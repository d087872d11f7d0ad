package claimer

import "github.com/fluxora/webhook-worker/outbox"

// RecordSQL is the outcome write, for the plan tests.
const RecordSQL = outbox.RecordSQL
