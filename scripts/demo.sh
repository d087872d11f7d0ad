#!/usr/bin/env bash
# The demo: migrates a fresh local database, starts the sample consumer
# (which verifies every signature, and answers slowly when an event asks it
# to), starts the worker, enqueues events the way a producer does, and shows
# them delivered: the first event takes the consumer 3 s, and the others are
# delivered and recorded meanwhile, each on its own slot. Everything it
# starts, it stops.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh

ADMIN_URL=${DEMO_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
DB=fluxora_demo
CONSUMER_ADDR=${DEMO_CONSUMER_ADDR:-127.0.0.1:8089}
METRICS_ADDR=${DEMO_METRICS_ADDR:-127.0.0.1:9464}
EVENTS=${DEMO_EVENTS:-5}
RUN=$(mktemp -d)

echo "== building bin/worker and bin/sample-consumer"
mkdir -p bin
go build -o bin/worker ./cmd/worker
go build -o bin/sample-consumer ./cmd/sample-consumer

echo "== creating database $DB"
psql -q "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
export DATABASE_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
export WEBHOOK_URL="http://$CONSUMER_ADDR/hooks"
export WEBHOOK_SECRET="demo-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export WEBHOOK_METRICS_ADDR="$METRICS_ADDR" LOG_FORMAT=text

echo "== worker migrate"
bin/worker migrate

pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$RUN"; }
trap cleanup EXIT

bin/sample-consumer -addr "$CONSUMER_ADDR" -honor-delay >"$RUN/consumer.log" 2>&1 & pids+=($!)
bin/worker 2>"$RUN/worker.log" & pids+=($!)
for _ in $(seq 1 100); do
  curl -fsS "http://$METRICS_ADDR/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$METRICS_ADDR/readyz" >/dev/null || { echo "worker not ready:"; cat "$RUN/worker.log"; exit 1; }

processed() { psql -tAq "$DATABASE_URL" -c "SELECT count(*) FROM webhook_outbox WHERE processed"; }

echo "== enqueueing $EVENTS events (one transaction each, as a producer would); the consumer takes 3 s over the first"
start=$(date +%s%N)
for i in $(seq 1 "$EVENTS"); do
  delay=0; [ "$i" -eq 1 ] && delay=3000
  psql -q "$DATABASE_URL" -c "BEGIN; INSERT INTO webhook_outbox (event_type, payload) VALUES ('stream.updated', '{\"stream\": $i, \"status\": \"live\", \"delay_ms\": $delay}'); COMMIT;"
done
for _ in $(seq 1 200); do
  n=$(processed)
  [ "$n" -ge $((EVENTS - 1)) ] && break
  sleep 0.05
done
echo "== $n of $EVENTS delivered and recorded in $(( ($(date +%s%N) - start) / 1000000 )) ms while the slow one is still in flight:"
bin/worker status
for _ in $(seq 1 200); do
  n=$(processed)
  [ "$n" -ge "$EVENTS" ] && break
  sleep 0.05
done
echo "== delivered $n of $EVENTS in $(( ($(date +%s%N) - start) / 1000000 )) ms; the consumer says:"
cat "$RUN/consumer.log"
echo "== outbox"
psql "$DATABASE_URL" -c "SELECT id, delivery_id, event_type, attempt, processed, processed_at - created_at AS lag FROM webhook_outbox ORDER BY id"
echo "== a few metrics"
curl -fsS "http://$METRICS_ADDR/metrics" | grep -E '^fluxora_webhook_(deliveries_total|notifications_received_total|claimed_batches_total|rows_in_flight|outcome_flush_size_(sum|count))' || true
[ "$n" -ge "$EVENTS" ] || { echo "demo FAILED: not every event was delivered"; cat "$RUN/worker.log"; exit 1; }
echo "== demo OK"
