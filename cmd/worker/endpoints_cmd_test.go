package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

const cliSecret = "whsec_cli_never_printed"

// endpointsCLI runs `worker endpoints ARGS` and fails the test unless it
// exits with want; it returns stdout and stderr.
func endpointsCLI(t *testing.T, db *testdb.DB, want int, args ...string) (string, string) {
	t.Helper()
	code, out, errs := ops(t, db, append([]string{"endpoints"}, args...)...)
	if code != want {
		t.Fatalf("worker endpoints %q: exit %d, want %d\n%s%s", args, code, want, out, errs)
	}
	if strings.Contains(out+errs, cliSecret) {
		t.Fatalf("worker endpoints %q printed the secret:\n%s%s", args, out, errs)
	}
	return out, errs
}

// cliPendingFor inserts n deliveries for endpoint id, due in an hour.
func cliPendingFor(t *testing.T, db *testdb.DB, id string, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
		SELECT 'later', '{}', $1, now() + interval '1 hour' FROM generate_series(1, $2)`, id, n)
	if err != nil {
		t.Fatal(err)
	}
}

func TestEndpointsCommands(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()

	out, _ := endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", "https://hooks.example.com/in?token=t0ps3cret",
		"--events", "invoice.paid, refund", "--secret", cliSecret, "--retry-rps", "5")
	if !strings.Contains(out, "added endpoint billing") || strings.Contains(out, "shown once") {
		t.Fatalf("add: %s", out)
	}
	out, _ = endpointsCLI(t, db, exitOK, "add", "--name", "all", "--url", "http://127.0.0.1:9000/hook")
	generated := ""
	for _, line := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(line, "secret (shown once): "); ok {
			generated = s
		}
	}
	if stored, _, sealed := storedSecrets(t, db, "all"); !strings.HasPrefix(generated, "whsec_") || stored != generated || !sealed {
		t.Fatalf("generated secret not printed once, or not the one stored:\n%s", out)
	}

	t.Run("list", func(t *testing.T) {
		out, _ := endpointsCLI(t, db, exitOK, "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "RETRY RPS") ||
			!strings.Contains(lines[1], "all") || !strings.Contains(lines[1], " * ") ||
			!strings.Contains(lines[2], "https://hooks.example.com/in ") || !strings.Contains(lines[2], "invoice.paid,refund") ||
			strings.Contains(out, "t0ps3cret") || strings.Contains(out, generated) {
			t.Fatalf("list:\n%s", out)
		}
		out, _ = endpointsCLI(t, db, exitOK, "list", "--json")
		var got []map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if len(got) != 2 || got[1]["name"] != "billing" || got[1]["url"] != "https://hooks.example.com/in" || got[1]["retry_rps"] != 5.0 ||
			got[0]["enabled"] != true || strings.Contains(out, "t0ps3cret") || strings.Contains(out, generated) || strings.Contains(out, "secret") {
			t.Fatalf("list --json:\n%s", out)
		}
	})

	t.Run("update", func(t *testing.T) {
		out, _ := endpointsCLI(t, db, exitOK, "update", "billing", "--url", "https://new.example.com/hook", "--retry-rps", "0")
		if !strings.Contains(out, "updated endpoint billing") || db.Count(t,
			"SELECT count(*) FROM webhook_endpoints WHERE name = 'billing' AND url = 'https://new.example.com/hook' AND retry_rps IS NULL AND event_types = '{invoice.paid,refund}'") != 1 {
			t.Fatalf("update: %s", out)
		}
		endpointsCLI(t, db, exitOK, "update", "--events", "*", "billing")
		if db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'billing' AND event_types = '{}'") != 1 {
			t.Fatal("--events * did not subscribe to every type")
		}
	})

	t.Run("disable enable remove", func(t *testing.T) {
		var id string
		if err := db.Pool.QueryRow(ctx, "SELECT id FROM webhook_endpoints WHERE name = 'all'").Scan(&id); err != nil {
			t.Fatal(err)
		}
		cliPendingFor(t, db, id, 3)
		out, _ := endpointsCLI(t, db, exitOK, "disable", "all")
		if !strings.Contains(out, "3 pending deliveries dead-lettered") || !strings.Contains(out, "worker dlq replay --endpoint all") ||
			db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE last_error = 'endpoint all disabled: disabled by operator'") != 3 {
			t.Fatalf("disable: %s", out)
		}
		out, _ = endpointsCLI(t, db, exitOK, "list")
		if !strings.Contains(out, "disabled by operator") {
			t.Fatalf("list after disable:\n%s", out)
		}
		endpointsCLI(t, db, exitOK, "enable", "all")
		cliPendingFor(t, db, id, 2)
		_, errs := endpointsCLI(t, db, exitFailure, "remove", "all")
		if !strings.Contains(errs, "2 pending deliveries") || !strings.Contains(errs, "--force") {
			t.Fatalf("remove without --force: %s", errs)
		}
		out, _ = endpointsCLI(t, db, exitOK, "remove", "all", "--force")
		if !strings.Contains(out, "removed endpoint all; 2 pending") || db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'all'") != 0 ||
			db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE last_error = 'endpoint all removed'") != 2 {
			t.Fatalf("remove --force: %s", out)
		}
		endpointsCLI(t, db, exitOK, "disable", "billing", "--reason", "consumer migrating")
		if db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'billing' AND disabled_reason = 'consumer migrating'") != 1 {
			t.Fatal("--reason not kept")
		}
	})

	t.Run("help", func(t *testing.T) {
		if code, out, _ := ops(t, db, "endpoints", "--help"); code != exitOK || !strings.Contains(out, "remove NAME [--force]") {
			t.Fatalf("help: exit %d\n%s", code, out)
		}
		if code, _, errs := ops(t, db, "endpoints", "add", "--help"); code != exitOK || !strings.Contains(errs, "--retry-rps") {
			t.Fatalf("add --help: exit %d\n%s", code, errs)
		}
	})
}

// Each refusal exits with its code and names the culprit.
func TestEndpointsRefusals(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	endpointsCLI(t, db, exitOK, "add", "--name", "taken", "--url", "https://hooks.example.com/", "--secret", cliSecret)
	ok := "https://hooks.example.com/"
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "--name", "x", "--url", "http://example.com/", "--secret", cliSecret}, exitUsage, "--url: must be https (http only for a loopback host)"},
		{[]string{"add", "--name", "x", "--url", "https://bob:hunter2@example.com/"}, exitUsage, "--url: must not contain credentials"},
		{[]string{"add", "--name", "x", "--url", "ftp://example.com/"}, exitUsage, "--url: must be https"},
		{[]string{"add", "--name", "default", "--url", ok}, exitUsage, `--name: "default" is reserved for the WEBHOOK_URL endpoint`},
		{[]string{"add", "--name", "bad name", "--url", ok}, exitUsage, `--name: "bad name": must be 1-64`},
		{[]string{"add", "--url", ok}, exitUsage, "--name is required"},
		{[]string{"add", "--name", "x"}, exitUsage, "--url is required"},
		{[]string{"add", "--name", "x", "--url", ok, "--events", "a,,b"}, exitUsage, "--events: an empty event type"},
		{[]string{"add", "--name", "x", "--url", ok, "--events", "a,*"}, exitUsage, `--events: "*"`},
		{[]string{"add", "--name", "x", "--url", ok, "--events", "inv*oice.paid"}, exitUsage,
			`--events: "inv*oice.paid": "*" may only end a type`},
		{[]string{"update", "taken", "--events", "a, *b*"}, exitUsage, `--events: "*b*": "*" may only end a type`},
		// An empty list would subscribe to every type: refused, on add and
		// update alike ("*" or no --events asks for every type).
		{[]string{"add", "--name", "x", "--url", ok, "--secret", cliSecret, "--events", ""}, exitUsage, `--events: "" lists no event type`},
		{[]string{"add", "--name", "x", "--url", ok, "--secret", cliSecret, "--events", " , ,"}, exitUsage, `--events: " , ," lists no event type`},
		{[]string{"add", "--name", "x", "--url", ok, "--secret", cliSecret, "--events= "}, exitUsage, `--events: " " lists no event type`},
		{[]string{"update", "taken", "--events", ""}, exitUsage, `--events: "" lists no event type`},
		{[]string{"update", "taken", "--events", ",\t"}, exitUsage, `--events: ",\t" lists no event type`},
		{[]string{"add", "--name", "x", "--url", ok, "--events", "a\x01"}, exitUsage, "--events: \"a\\x01\": each type must be 1-255 bytes"},
		{[]string{"add", "--name", "x", "--url", ok, "--retry-rps", "-1"}, exitUsage, "-retry-rps: must be a whole number from 0 to 1000000"},
		{[]string{"add", "--name", "x", "--url", ok, "--retry-rps", "many"}, exitUsage, "retry-rps"},
		{[]string{"add", "--name", "taken", "--url", ok, "--secret", cliSecret}, exitFailure, `endpoint "taken" already exists`},
		{[]string{"add", "x", "--name", "x", "--url", ok}, exitUsage, `unexpected argument "x"`},
		{[]string{"update", "ghost", "--url", ok}, exitFailure, `no endpoint named "ghost"`},
		{[]string{"update", "taken"}, exitUsage, "at least one of --url, --events, --retry-rps"},
		{[]string{"update", "taken", "--url", "http://example.com/"}, exitUsage, "--url: must be https"},
		{[]string{"update", "--url", ok}, exitUsage, "exactly one endpoint NAME"},
		{[]string{"update", "a", "b", "--url", ok}, exitUsage, "exactly one endpoint NAME"},
		{[]string{"disable", "ghost"}, exitFailure, `no endpoint named "ghost"`},
		{[]string{"disable", "taken", "--reason", ""}, exitUsage, "--reason: must not be empty"},
		{[]string{"enable", "default"}, exitFailure, "WEBHOOK_URL endpoint of the environment"},
		{[]string{"remove", "ghost", "--force"}, exitFailure, `no endpoint named "ghost"`},
		{[]string{"remove"}, exitUsage, "exactly one endpoint NAME"},
		{[]string{"list", "--bogus"}, exitUsage, "-bogus"},
		{[]string{"rotate-secret", "ghost"}, exitFailure, `no endpoint named "ghost"`},
		{[]string{"rotate-secret", "default"}, exitFailure, "WEBHOOK_URL endpoint of the environment"},
		{[]string{"rotate-secret"}, exitUsage, "exactly one endpoint NAME"},
		{[]string{"rotate-secret", "taken", "--grace", "-1s"}, exitUsage, "-grace: out of range: must be from 0 to 30d"},
		{[]string{"rotate-secret", "taken", "--grace", "721h"}, exitUsage, "-grace: out of range: must be from 0 to 30d"},
		{[]string{"rotate-secret", "taken", "--grace", "a day"}, exitUsage, "-grace"},
		{[]string{"rotate-secret", "taken", "--secret", cliSecret}, exitUsage, "--secret: is the endpoint's current secret"},
		{[]string{"rename", "x"}, exitUsage, `unknown command "rename"`},
		{nil, exitUsage, "usage:"},
	} {
		_, errs := endpointsCLI(t, db, tc.code, tc.args...)
		if !strings.Contains(errs, tc.want) || strings.Contains(errs, "hunter2") {
			t.Errorf("%q: stderr %q, want %q", tc.args, errs, tc.want)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints"); n != 1 {
		t.Fatalf("%d endpoints, want only the one added", n)
	}
	if code, _, errs := ops(t, testdb.NewEmpty(t), "endpoints", "list"); code != exitSchema || !strings.Contains(errs, "worker migrate") {
		t.Fatalf("unmigrated: exit %d %s", code, errs)
	}
}
