package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// extremeValues are, per column a producer writes, values at and near the
// ends of what the schema accepts. A generated row picks one of each.
var extremeValues = map[string][]string{
	"event_type": {
		"a", strings.Repeat("e", 255), strings.Repeat("€", 85), "with spaces and \"quotes\"", "ü.ñ-ï_*", "   padded   ",
		strings.Repeat("\u00a0", 127), // no-break spaces, two bytes each
	},
	"payload": {
		`{}`, `null`, `0`, `"text"`, `[]`, `{"k": "\ud83d\ude00 \u2028"}`,
		`{"big": "` + strings.Repeat("x", 262144-12) + `"}`, // 262,144 bytes of jsonb text: the limit
		strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
		strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000),
		manyKeys(5000),
	},
	"headers": {
		"", `{}`, `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		headersOfSize(16, 8192), `{"!#$%&'*+.^_|~": "ÿ é", "x-empty": ""}`, `{"X-Padded": "   v   "}`,
	},
	"attempt":     {"1", "2", "999", "1000", "2147483647"},
	"delivery_id": {"", "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", "dup"},
	// Near the ends of bigint (the row's number is subtracted or added).
	"id":     {"", "max", "min", "zero"},
	"target": {"event", "endpoint"},
	// A lease a previous worker left behind, at the end of reclaims' range.
	"lease": {"", "", "", "expired-at-max-reclaims"},
}

func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d": %d`, i, i)
	}
	b.WriteString("}")
	return b.String()
}

// headersOfSize is n headers whose names and values come to total bytes.
func headersOfSize(n, total int) string {
	parts := make([]string, n)
	per := total / n
	for i := range n {
		name := fmt.Sprintf("x-h%02d", i)
		parts[i] = fmt.Sprintf("%q: %q", name, strings.Repeat("v", per-len(name)))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// A property test of the outbox's inputs: rows with extreme
// values of every column a producer writes, mixed with ordinary ones, each
// to the WEBHOOK_URL endpoint and a table endpoint, against a consumer that
// fails a quarter of the attempts. Every delivery of every accepted row
// ends delivered (a 2xx attempt) or dead-lettered, exactly once, and
// nothing stays pending. FLUXORA_PROPERTY_SEED picks another sample.
func TestExtremeRowsAreDeliveredOrDeadLettered(t *testing.T) {
	t.Parallel()
	seed := uint64(20261204)
	if s := os.Getenv("FLUXORA_PROPERTY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (FLUXORA_PROPERTY_SEED)", seed)
	rnd := rand.New(rand.NewPCG(seed, seed))
	db := testdb.New(t)
	ctx := context.Background()
	c := newConsumer(t, func(d delivery) int {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%s/%d", d.ID, d.Endpoint, d.Attempt)
		if h.Sum32()%4 == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	var endpoint string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('table', $1, $2) RETURNING id::text`,
		c.srv.URL, testSecret).Scan(&endpoint); err != nil {
		t.Fatal(err)
	}
	accepted, refused := 0, 0
	for i := range 120 {
		row := map[string]string{}
		for col, vals := range extremeValues {
			row[col] = vals[rnd.IntN(len(vals))]
		}
		if i%3 == 0 { // ordinary rows among them
			row = map[string]string{"event_type": "ordinary", "payload": `{"i": 1}`, "attempt": "1", "target": "event"}
		}
		if err := insertExtreme(ctx, db, row, endpoint, i); err != nil {
			refused++
			t.Logf("refused by the schema (fine): %.200v", err)
			continue
		}
		accepted++
	}
	t.Logf("%d rows accepted, %d refused by the schema", accepted, refused)
	startInProcess(t, baseEnv(db, c, map[string]string{
		"WEBHOOK_MAX_ATTEMPTS": "3", "WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "50", "WEBHOOK_BATCH_SIZE": "7",
	}))
	waitfor.True(t, 90*time.Second, "every row processed", func() bool {
		return db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE NOT processed`) == 0
	})
	// Per delivery (delivery id and endpoint): the rows that asked for it,
	// against the ends it met. A delivery id a producer gave twice asks
	// twice.
	rows, err := db.Pool.Query(ctx, `
WITH asked AS (
  SELECT delivery_id, NULL::uuid AS endpoint_id FROM webhook_outbox WHERE endpoint_id IS NULL AND attempt_origin
  UNION ALL
  SELECT md5(delivery_id::text || '/' || $1)::uuid, $1::uuid FROM webhook_outbox WHERE endpoint_id IS NULL AND attempt_origin
  UNION ALL
  SELECT delivery_id, endpoint_id FROM webhook_outbox WHERE endpoint_id IS NOT NULL AND attempt_origin
), ended AS (
  SELECT delivery_id, endpoint_id FROM webhook_attempts WHERE status BETWEEN 200 AND 299
  UNION ALL
  SELECT delivery_id, endpoint_id FROM webhook_dead_letter
), a AS (SELECT delivery_id, endpoint_id, count(*) AS n FROM asked GROUP BY 1, 2),
   e AS (SELECT delivery_id, endpoint_id, count(*) AS n FROM ended GROUP BY 1, 2)
SELECT coalesce(a.delivery_id, e.delivery_id)::text, coalesce(a.n, 0), coalesce(e.n, 0)
FROM a FULL JOIN e ON a.delivery_id = e.delivery_id AND a.endpoint_id IS NOT DISTINCT FROM e.endpoint_id
WHERE coalesce(a.n, 0) <> coalesce(e.n, 0)`, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var asked, ended int
		if err := rows.Scan(&id, &asked, &ended); err != nil {
			t.Fatal(err)
		}
		t.Errorf("delivery %s: asked for %d times, ended %d times", id, asked, ended)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_attempts WHERE status BETWEEN 200 AND 299`); n == 0 {
		t.Fatal("nothing was delivered")
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter`); n == 0 {
		t.Fatal("nothing was dead-lettered: the consumer's failures did not happen")
	}
}

// insertExtreme inserts row as a producer would, marking it as an origin
// (the attempt_origin column exists only in this test's database).
func insertExtreme(ctx context.Context, db *testdb.DB, row map[string]string, endpoint string, n int) error {
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE webhook_outbox ADD COLUMN IF NOT EXISTS attempt_origin boolean NOT NULL DEFAULT false`); err != nil {
		return err
	}
	cols := []string{"event_type", "payload", "attempt", "attempt_origin"}
	vals := []string{"$1", "$2::jsonb", "$3::int", "true"}
	args := []any{row["event_type"], row["payload"], row["attempt"]}
	add := func(col, expr string, arg any) {
		args = append(args, arg)
		cols = append(cols, col)
		vals = append(vals, strings.ReplaceAll(expr, "?", "$"+strconv.Itoa(len(args))))
	}
	if h := row["headers"]; h != "" {
		add("headers", "?::jsonb", h)
	}
	switch d := row["delivery_id"]; d {
	case "":
	case "dup":
		cols, vals = append(cols, "delivery_id"), append(vals, "coalesce((SELECT delivery_id FROM webhook_outbox WHERE attempt_origin ORDER BY id DESC LIMIT 1), gen_random_uuid())")
	default:
		add("delivery_id", "?::uuid", d)
	}
	switch row["id"] {
	case "max":
		add("id", "9223372036854775807 - ?::bigint", n)
	case "min":
		add("id", "-9223372036854775808 + ?::bigint", n)
	case "zero":
		add("id", "-?::bigint", n)
	}
	if row["target"] == "endpoint" {
		add("endpoint_id", "?::uuid", endpoint)
	}
	if row["lease"] != "" {
		cols = append(cols, "lease_token", "locked_until", "reclaims")
		vals = append(vals, "gen_random_uuid()", "now() - interval '1 minute'", "2147483647")
	}
	_, err := db.Pool.Exec(ctx, "INSERT INTO webhook_outbox ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(vals, ", ")+")", args...)
	return err
}
