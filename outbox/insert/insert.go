// Package insert holds a producer's enqueue statements: the only SQL on
// the worker's tables outside package outbox, kept here, beside it,
// because the producer kit runs them in the producer's own transaction
// and must not pull in the store's driver (pgx): this package imports
// nothing.
package insert

// EventSQL is a producer's enqueue of one event ($1 event type, $2 the
// payload as JSON text, $3 the headers as a JSON object text or NULL, $4
// the ordering key or NULL), returning its delivery id. It runs in the
// producer's own transaction (the producer kit runs it; webhook_enqueue is
// its SQL twin), where the table's constraints check every column.
// Positional parameters, unlike the store's other statements: a producer
// may run it through database/sql with any PostgreSQL driver.
const EventSQL = `INSERT INTO webhook_outbox (event_type, payload, headers, ordering_key) VALUES ($1, $2::jsonb, $3::jsonb, $4::text)
RETURNING delivery_id::text`

// ToEndpointSQL is EventSQL for one endpoint ($5, its name): it inserts
// nothing, and returns no row, when no endpoint has the name.
const ToEndpointSQL = `INSERT INTO webhook_outbox (event_type, payload, headers, ordering_key, endpoint_id)
SELECT $1, $2::jsonb, $3::jsonb, $4::text, id FROM webhook_endpoints WHERE name = $5 RETURNING delivery_id::text`
