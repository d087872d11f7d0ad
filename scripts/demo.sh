#!/usr/bin/env bash
# The demo: migrates a fresh local database, starts two sample consumers
# (each verifies every signature with its own secret), registers them as
# endpoints with `worker endpoints add` (one subscribed to invoice.paid only,
# one to everything), starts the worker, enqueues events the way a producer
# does (one of them for one endpoint only) and shows each endpoint receiving
# exactly what it subscribed to. Then it rotates one endpoint's secret: its
# consumer, still on the old secret, keeps verifying during the grace period;
# that event carries a traceparent header of its own, and `worker attempts`
# shows the record of its delivery. Last, hardening: a time, an
# address and an age the worker cannot handle are refused where they are
# given, and an endpoint URL spelling 127.0.0.1 as one number is delivered to.
# Then scale: an endpoint that takes 10 s to answer, with 20,000
# deliveries pending, holds back no event of another endpoint, and the rows
# live in the outbox's partitions: pending ones in webhook_outbox_pending,
# history in a partition of the day.
# Then ordered delivery: an order's three events with one
# ordering key arrive in order although the consumer fails the first once,
# each with its sequence number, while an event without a key goes at once.
# Then operator events: an endpoint subscribed to fluxora.endpoint.* is told,
# by a signed delivery, when 'down' is disabled.
# Last, the console: it prints the console's address and token
# file, and reads the endpoints through its API (DEMO_KEEP_CONSOLE=1 keeps
# it up to browse).
# Everything it starts, it stops.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh

ADMIN_URL=${DEMO_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
DB=fluxora_demo
BILLING_ADDR=${DEMO_BILLING_ADDR:-127.0.0.1:8089}
AUDIT_ADDR=${DEMO_AUDIT_ADDR:-127.0.0.1:8090}
DOWN_ADDR=${DEMO_DOWN_ADDR:-127.0.0.1:8091}
METRICS_ADDR=${DEMO_METRICS_ADDR:-127.0.0.1:9464}
CONSOLE_ADDR=${DEMO_CONSOLE_ADDR:-127.0.0.1:8092}
LEDGER_ADDR=${DEMO_LEDGER_ADDR:-127.0.0.1:8093}
OPS_ADDR=${DEMO_OPS_ADDR:-127.0.0.1:8094}
RUN=$(mktemp -d)

echo "== building bin/worker and bin/sample-consumer"
mkdir -p bin
go build -o bin/worker ./cmd/worker
go build -o bin/sample-consumer ./cmd/sample-consumer

echo "== creating database $DB"
psql -q "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
export DATABASE_URL="${ADMIN_URL%/*}/$DB?sslmode=disable"
# No WEBHOOK_URL: every consumer is an endpoint of webhook_endpoints.
unset WEBHOOK_URL WEBHOOK_SECRET
export WEBHOOK_METRICS_ADDR="$METRICS_ADDR" LOG_FORMAT=text

echo "== worker migrate"
bin/worker migrate

pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$RUN"; }
trap cleanup EXIT

echo "== worker keys generate: the key file that encrypts the stored secrets (mode 0600)"
(umask 077 && bin/worker keys generate >"$RUN/secrets.keys")
chmod 600 "$RUN/secrets.keys"
export WEBHOOK_SECRETS_KEY_FILE="$RUN/secrets.keys"
ls -l "$RUN/secrets.keys" | awk '{print $1, $NF}'

echo "== worker endpoints add (billing: invoice.paid only; audit: every event type; secrets generated)"
bin/worker endpoints add --name billing --url "http://$BILLING_ADDR/hooks" --events invoice.paid | tee "$RUN/billing.add"
bin/worker endpoints add --name audit --url "http://$AUDIT_ADDR/hooks" | tee "$RUN/audit.add"
secret_of() { grep -o 'whsec_[A-Za-z0-9+/=]*' "$1" | head -1; }
WEBHOOK_SECRET=$(secret_of "$RUN/billing.add") bin/sample-consumer -addr "$BILLING_ADDR" >"$RUN/billing.log" 2>&1 & pids+=($!)
WEBHOOK_SECRET=$(secret_of "$RUN/audit.add") bin/sample-consumer -addr "$AUDIT_ADDR" >"$RUN/audit.log" 2>&1 & pids+=($!)
bin/worker endpoints list

bin/worker 2>"$RUN/worker.log" & pids+=($!)
for _ in $(seq 1 100); do
  curl -fsS "http://$METRICS_ADDR/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$METRICS_ADDR/readyz" >/dev/null || { echo "worker not ready:"; cat "$RUN/worker.log"; exit 1; }

echo "== enqueueing 5 events, one transaction each, as a producer would; the last one for billing only"
start=$(date +%s%N)
psql -q "$DATABASE_URL" >/dev/null <<'SQL'
BEGIN; INSERT INTO webhook_outbox (event_type, payload) VALUES ('stream.updated', '{"stream": 1}'); COMMIT;
BEGIN; INSERT INTO webhook_outbox (event_type, payload) VALUES ('invoice.paid', '{"invoice": 2}'); COMMIT;
BEGIN; SELECT webhook_enqueue('stream.updated', '{"stream": 3}'); COMMIT;
BEGIN; SELECT webhook_enqueue('invoice.paid', '{"invoice": 4}'); COMMIT;
BEGIN; SELECT webhook_enqueue('invoice.refunded', '{"invoice": 5}', 'billing'); COMMIT;
SQL
verified() { grep -c '^verified' "$1" 2>/dev/null || true; }
for _ in $(seq 1 200); do
  [ "$(verified "$RUN/billing.log")" -ge 3 ] && [ "$(verified "$RUN/audit.log")" -ge 4 ] && break
  sleep 0.05
done
echo "== delivered in $(( ($(date +%s%N) - start) / 1000000 )) ms"
echo "== billing (invoice.paid, and the event enqueued for it alone) says:"
cat "$RUN/billing.log"
echo "== audit (every event type) says:"
cat "$RUN/audit.log"
echo "== worker status"
bin/worker status
echo "== outbox: one row per event, and one per delivery it fanned out to; 'in flight' events were leased whole, their deliveries' rows written with their outcomes (migration 018)"
psql "$DATABASE_URL" -c "SELECT o.id, o.event_type, coalesce(e.name, '(event)') AS endpoint, o.fanout, o.fan_to IS NOT NULL AS \"in flight\", o.delivery_id, o.processed FROM webhook_outbox o LEFT JOIN webhook_endpoints e ON e.id = o.endpoint_id ORDER BY o.id"
echo "== a few metrics"
curl -fsS "http://$METRICS_ADDR/metrics" | grep -E '^fluxora_webhook_(deliveries_total\{.*outcome="delivered"|events_fanned_out_total|events_unrouted_total)' || true
b=$(verified "$RUN/billing.log"); a=$(verified "$RUN/audit.log")
if [ "$b" -ne 3 ] || [ "$a" -ne 4 ] || grep -q rejected "$RUN/billing.log" "$RUN/audit.log"; then
  echo "demo FAILED: billing verified $b (want 3), audit verified $a (want 4)"; cat "$RUN/worker.log"; exit 1
fi
echo "== worker endpoints rotate-secret audit --grace 1h: a new secret signs from now on; the audit consumer still holds the old one"
bin/worker endpoints rotate-secret audit --grace 1h | sed 's/\(shown once): \).*/\1whsec_… (hidden in the demo)/'
bin/worker endpoints list
echo "== event 6 carries its own traceparent header (webhook_enqueue's 4th argument)"
psql -q "$DATABASE_URL" -c "SELECT webhook_enqueue('stream.updated', '{\"stream\": 6}', NULL, '{\"traceparent\": \"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\"}')" >/dev/null
for _ in $(seq 1 200); do
  [ "$(verified "$RUN/audit.log")" -ge 5 ] && break
  sleep 0.05
done
echo "== audit, still on its old secret, verifies event 6 by the old secret's signature in webhook-signature (signatures=2), its traceparent passed on:"
tail -n 1 "$RUN/audit.log"
if [ "$(verified "$RUN/audit.log")" -ne 5 ] || ! tail -n 1 "$RUN/audit.log" | grep -q 'signatures=2' || grep -q rejected "$RUN/audit.log"; then
  echo "demo FAILED: the audit consumer did not verify event 6 with its old secret during the grace period"; cat "$RUN/worker.log"; exit 1
fi
echo "== worker attempts: the record of every attempt of that delivery"
bin/worker attempts "$(tail -n 1 "$RUN/audit.log" | awk '{print $2}')"
if ! tail -n 1 "$RUN/audit.log" | grep -q 'traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736'; then
  echo "demo FAILED: event 6 arrived without its traceparent header"; exit 1
fi
echo "== hardening: what the worker cannot handle is refused where it is written"
expect_refusal() { # expect_refusal WHAT COMMAND...: the command must fail; its message is shown
  local out
  if out=$("${@:2}" 2>&1); then echo "demo FAILED: $1 was accepted"; exit 1; fi
  echo "   $1: $(echo "$out" | grep -m1 -E 'ERROR|worker|invalid' | sed 's/^psql:[^E]*//')"
}
expect_refusal "a created_at of -infinity" psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('x', '{}', '-infinity')"
expect_refusal "an endpoint at 012.0.0.1 (octal: 10.0.0.1)" bin/worker endpoints add --name inside --url https://012.0.0.1/hooks
expect_refusal "purging dead letters older than 106752 days" bin/worker dlq purge --before 106752d --yes
expect_refusal "an endpoint at https://10.0.0.①/ (Unicode digits, which the HTTP client maps to 10.0.0.1)" bin/worker endpoints add --name inside --url 'https://10.0.0.①/hooks'
expect_refusal "a per-event header Webhook_Signature (CGI servers read it as webhook-signature)" psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "SELECT webhook_enqueue('x', '{}', NULL, '{\"Webhook_Signature\": \"v1,forged\"}')"
if [ "${AUDIT_ADDR%:*}" = 127.0.0.1 ]; then
  echo "== audit's URL spelled http://2130706433:${AUDIT_ADDR#*:}/hooks (127.0.0.1 as one number, read as a browser reads it, never sent to DNS); event 7"
  bin/worker endpoints update audit --url "http://2130706433:${AUDIT_ADDR#*:}/hooks" >/dev/null
  psql -q "$DATABASE_URL" -c "INSERT INTO webhook_outbox (event_type, payload) VALUES ('stream.updated', '{\"stream\": 7}')"
  for _ in $(seq 1 200); do
    [ "$(verified "$RUN/audit.log")" -ge 6 ] && break
    sleep 0.05
  done
  [ "$(verified "$RUN/audit.log")" -eq 6 ] || { echo "demo FAILED: audit did not receive event 7 at 2130706433"; cat "$RUN/worker.log"; exit 1; }
  tail -n 1 "$RUN/audit.log"
fi

echo "== scale: endpoint 'down' takes 10 s to answer (until the worker's timeout) and has 20,000 deliveries pending; a new event for billing is not held back"
bin/worker endpoints add --name down --url "http://$DOWN_ADDR/hooks" --events nothing.else >"$RUN/down.add"
WEBHOOK_SECRET=$(secret_of "$RUN/down.add") bin/sample-consumer -addr "$DOWN_ADDR" -honor-delay >"$RUN/down.log" 2>&1 & pids+=($!)
psql -q "$DATABASE_URL" -c "INSERT INTO webhook_outbox (event_type, payload, endpoint_id)
  SELECT 'stream.updated', jsonb_build_object('delay_ms', 10000, 'n', g), e.id FROM webhook_endpoints e, generate_series(1, 20000) g WHERE e.name = 'down'"
sleep 1 # let the worker take down's first rows: they hang
before=$(verified "$RUN/billing.log")
start=$(date +%s%N)
psql -q "$DATABASE_URL" -c "INSERT INTO webhook_outbox (event_type, payload, endpoint_id) SELECT 'invoice.paid', '{\"invoice\": 8}', id FROM webhook_endpoints WHERE name = 'billing'"
for _ in $(seq 1 200); do
  [ "$(verified "$RUN/billing.log")" -gt "$before" ] && break
  sleep 0.01
done
[ "$(verified "$RUN/billing.log")" -gt "$before" ] || { echo "demo FAILED: billing did not receive its event beside down's backlog"; cat "$RUN/worker.log"; exit 1; }
echo "   billing received it in $(( ($(date +%s%N) - start) / 1000000 )) ms, with 20,000 rows of down's ahead of it"
echo "== where the rows live: pending ones in webhook_outbox_pending, the history in a partition of the day (retention drops it whole)"
psql "$DATABASE_URL" -c "SELECT tableoid::regclass AS partition, count(*) AS rows FROM webhook_outbox GROUP BY 1 ORDER BY 1"
echo "== operator events: endpoint 'ops' subscribes to fluxora.endpoint.*; disabling 'down' tells it, in the same transaction, signed like any delivery"
bin/worker endpoints add --name ops --url "http://$OPS_ADDR/hooks" --events 'fluxora.endpoint.*' >"$RUN/ops.add"
WEBHOOK_SECRET=$(secret_of "$RUN/ops.add") bin/sample-consumer -addr "$OPS_ADDR" >"$RUN/ops.log" 2>&1 & pids+=($!)
bin/worker endpoints disable down --reason "taken out for the demo"
for _ in $(seq 1 100); do [ "$(verified "$RUN/ops.log")" -ge 1 ] && break; sleep 0.1; done
grep -q '^verified [0-9a-f-]* fluxora.endpoint.disabled ' "$RUN/ops.log" ||
  { echo "demo FAILED: ops did not receive a verified fluxora.endpoint.disabled"; cat "$RUN/ops.log"; exit 1; }
grep -m1 '^verified' "$RUN/ops.log" | sed -E 's/^verified [0-9a-f-]+ /   verified /; s/ signatures=[0-9]+ traceparent=-//'
echo "== worker endpoints remove down --force"
bin/worker endpoints remove down --force

echo "== ordered delivery: order-42's created, paid, shipped to endpoint 'ledger', whose consumer fails 'created' once; an event without a key beside them"
bin/worker endpoints add --name ledger --url "http://$LEDGER_ADDR/hooks" --events order.step,order.note >"$RUN/ledger.add"
WEBHOOK_SECRET=$(secret_of "$RUN/ledger.add") bin/sample-consumer -addr "$LEDGER_ADDR" -honor-delay >"$RUN/ledger.log" 2>&1 & pids+=($!)
psql -qAt "$DATABASE_URL" -o /dev/null -c "SELECT webhook_enqueue('order.step', '{\"order\": 42, \"step\": \"created\", \"fail_first\": true}', 'ledger', ordering_key => 'order-42')" \
  -c "SELECT webhook_enqueue('order.step', '{\"order\": 42, \"step\": \"paid\"}', 'ledger', ordering_key => 'order-42')" \
  -c "SELECT webhook_enqueue('order.step', '{\"order\": 42, \"step\": \"shipped\"}', 'ledger', ordering_key => 'order-42')" \
  -c "SELECT webhook_enqueue('order.note', '{\"note\": \"no key: goes at once\"}', 'ledger')"
for _ in $(seq 1 100); do [ "$(verified "$RUN/ledger.log")" -ge 4 ] && break; sleep 0.1; done
[ "$(verified "$RUN/ledger.log")" -ge 4 ] || { echo "demo FAILED: ledger did not receive its 4 events"; cat "$RUN/ledger.log"; exit 1; }
grep -E '^(verified|failed)' "$RUN/ledger.log" | sed -E 's/^(verified|failed) [0-9a-f-]+ /\1 /; s/ signatures=[0-9]+ traceparent=-//' | sed 's/^/   /'
order=$(grep '^verified' "$RUN/ledger.log" | grep -o '"step": "[a-z]*"' | tr '\n' ' ')
[ "$order" = '"step": "created" "step": "paid" "step": "shipped" ' ] || { echo "demo FAILED: order-42 arrived as $order"; exit 1; }
seqs=$(grep '^verified' "$RUN/ledger.log" | grep -o 'key=order-42 seq=[0-9]*' | tr '\n' ' ')
[ "$seqs" = 'key=order-42 seq=1 key=order-42 seq=2 key=order-42 seq=3 ' ] || { echo "demo FAILED: order-42's sequence numbers: $seqs"; exit 1; }
first=$(grep '^verified' "$RUN/ledger.log" | head -1)
case "$first" in *'no key'*) ;; *) echo "demo FAILED: the event without a key waited behind order-42: $first"; exit 1 ;; esac
echo "   order-42 arrived created, paid, shipped (sequence 1, 2, 3), 'created' retried first; the event without a key did not wait"

echo "== the console: worker console, its token in a file"
(umask 077; head -c 32 /dev/urandom | base64 >"$RUN/console.token")
WEBHOOK_CONSOLE_TOKEN_FILE="$RUN/console.token" bin/worker console --addr "$CONSOLE_ADDR" >"$RUN/console.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do grep -q 'serving' "$RUN/console.log" 2>/dev/null && break; sleep 0.1; done
grep -q 'serving' "$RUN/console.log" || { echo "demo FAILED: the console did not start"; cat "$RUN/console.log"; exit 1; }
echo "   console: http://$CONSOLE_ADDR/ (log in with the token in $RUN/console.token; removed when the demo ends)"
echo "   GET /api/endpoints with the bearer token:"
curl -fsS -H "Authorization: Bearer $(cat "$RUN/console.token")" "http://$CONSOLE_ADDR/api/endpoints" |
  python3 -c 'import json,sys; [print("     %-8s enabled=%-5s backlog=%-6d attempts(1h)=%-4d p50=%s ms" % (e["name"], e["enabled"], e["backlog"], e["attempts_last_hour"], e["p50_ms"] and round(e["p50_ms"], 1))) for e in json.load(sys.stdin)]'
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$CONSOLE_ADDR/api/endpoints")
[ "$code" = 401 ] || { echo "demo FAILED: the console answered $code without a token"; exit 1; }
echo "   without the token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: rebound.example' -H "Authorization: Bearer $(cat "$RUN/console.token")" "http://$CONSOLE_ADDR/api/endpoints")
[ "$code" = 421 ] || { echo "demo FAILED: the console answered $code to a Host it does not serve"; exit 1; }
echo "   with the token but a Host it does not serve (a DNS-rebinding page): $code"
for _ in $(seq 1 12); do curl -s -o /dev/null -H "Authorization: Bearer not-the-token-but-a-guess-0123456789" "http://$CONSOLE_ADDR/api/endpoints"; done
wrong=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer not-the-token-but-a-guess-0123456789" "http://$CONSOLE_ADDR/api/endpoints")
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$RUN/console.token")" "http://$CONSOLE_ADDR/api/endpoints")
[ "$wrong" = 429 ] && [ "$code" = 200 ] || { echo "demo FAILED: after 13 wrong tokens a wrong one got $wrong (want 429), the right one $code (want 200)"; exit 1; }
echo "   after 13 wrong tokens from this address: a wrong one $wrong, the right one $code (guessing is throttled, the operator never locked out)"
if [ -n "${DEMO_KEEP_CONSOLE:-}" ]; then
  echo "== DEMO_KEEP_CONSOLE is set: the console stays up at http://$CONSOLE_ADDR/ (token file $RUN/console.token) until Ctrl-C"
  wait "${pids[-1]}" || true
fi
echo "== demo OK: billing received 4, audit 4 (+1 after its secret's rotation, +1 at its URL spelled as one number), every signature verified with the endpoint's own secret; billing served beside a backlog of 20,000; ops told of down's disabling; order-42 in order"
