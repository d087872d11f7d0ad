package main

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// opsInputFixture: two dead letters (10 days and 1 hour old) and endpoint
// shop (retry rps 5, secret cliSecret). unchanged fails the test unless
// all of it is still there as it was.
func opsInputFixture(t *testing.T) (db *testdb.DB, unchanged func(what string)) {
	t.Helper()
	db = testdb.New(t)
	deadLetters(t, db, [3]string{idA, "e", "10 days"}, [3]string{idB, "e", "1 hour"})
	endpointsCLI(t, db, exitOK, "add", "--name", "shop", "--url", "https://hooks.example.com/", "--secret", cliSecret, "--retry-rps", "5")
	return db, func(what string) {
		t.Helper()
		if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 2 {
			t.Errorf("%s: %d dead letters left, want 2", what, n)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 0 {
			t.Errorf("%s: %d outbox rows, want 0", what, n)
		}
		cur, prev, _ := storedSecrets(t, db, "shop")
		if n := db.Count(t, `SELECT count(*) FROM webhook_endpoints WHERE name = 'shop' AND retry_rps = 5 AND enabled
			AND secret_previous IS NULL`); n != 1 || cur != cliSecret || prev != "" || db.Count(t, "SELECT count(*) FROM webhook_endpoints") != 1 {
			t.Errorf("%s: endpoint shop changed, or another was added", what)
		}
	}
}

// An age too large for time.Duration used to wrap around to a time in the
// future: purge --yes then deleted every dead letter.
func TestDLQPurgeOverflowingAgeDeletesNothing(t *testing.T) {
	t.Parallel()
	db, unchanged := opsInputFixture(t)
	code, out, errs := ops(t, db, "dlq", "purge", "--before", "106752d", "--yes")
	if code != exitUsage || !strings.Contains(errs, `invalid value "106752d" for flag -before: out of range: an age must be from 0 to 36500d`) {
		t.Fatalf("exit %d, want 2 naming --before and the range:\n%s%s", code, out, errs)
	}
	unchanged("purge --before 106752d --yes")
}

// Every duration and number an operator passes is checked against its
// range when the flags are parsed: exit 2 naming the flag and the range,
// and nothing touched.
func TestOutOfRangeFlagsTouchNothing(t *testing.T) {
	t.Parallel()
	db, unchanged := opsInputFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "purge", "--before", "9999999999h", "--yes"}, "-before: out of range: an age must be from 0 to 36500d"},
		{[]string{"dlq", "purge", "--before", "99999999999999999999d", "--yes"}, "-before: out of range"},
		{[]string{"dlq", "purge", "--before", "1e30s", "--yes"}, "-before: not a time"},
		{[]string{"dlq", "replay", "--all", "--since", "106752d"}, "-since: out of range: an age must be from 0 to 36500d"},
		{[]string{"dlq", "list", "--limit", "99999999999"}, "-limit: must be a whole number from 1 to 1000000"},
		{[]string{"dlq", "list", "--limit", "0"}, "-limit: must be a whole number from 1 to 1000000"},
		{[]string{"endpoints", "add", "--name", "big", "--url", "https://hooks.example.com/", "--retry-rps", "99999999999"}, "-retry-rps: must be a whole number from 0 to 1000000"},
		{[]string{"endpoints", "add", "--name", "big", "--url", "https://hooks.example.com/", "--retry-rps", "1000001"}, "-retry-rps: must be a whole number from 0 to 1000000"},
		{[]string{"endpoints", "update", "shop", "--retry-rps", "99999999999"}, "-retry-rps: must be a whole number from 0 to 1000000"},
		{[]string{"endpoints", "update", "shop", "--retry-rps", "-1"}, "-retry-rps: must be a whole number from 0 to 1000000"},
		{[]string{"endpoints", "rotate-secret", "shop", "--grace", "106752d", "--secret", "whsec_next"}, "-grace: out of range: must be from 0 to 30d"},
		{[]string{"endpoints", "rotate-secret", "shop", "--grace", "9999999999h", "--secret", "whsec_next"}, "-grace: out of range: must be from 0 to 30d"},
		{[]string{"endpoints", "rotate-secret", "shop", "--grace", "31d", "--secret", "whsec_next"}, "-grace: out of range: must be from 0 to 30d"},
	} {
		code, out, errs := ops(t, db, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s%s", tc.args, code, tc.want, out, errs)
		}
		unchanged(strings.Join(tc.args, " "))
	}
	// In range, days included, they still work.
	if code, out, errs := ops(t, db, "dlq", "purge", "--before", "36500d"); code != exitUsage || !strings.Contains(out, "would delete 0") {
		t.Fatalf("purge --before 36500d: exit %d %s%s", code, out, errs)
	}
	endpointsCLI(t, db, exitOK, "rotate-secret", "shop", "--grace", "7d", "--secret", "whsec_next")
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE secret_previous_until BETWEEN now() + interval '6 days 23 hours' AND now() + interval '7 days'"); n != 1 {
		t.Fatalf("--grace 7d: %d endpoints with a 7-day grace", n)
	}
}

// Every --json prints one JSON document, [] for an empty list, never
// nothing.
func TestEmptyJSONLists(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, args := range [][]string{{"dlq", "list", "--json"}, {"endpoints", "list", "--json"}} {
		if code, out, errs := ops(t, db, args...); code != exitOK || out != "[]\n" {
			t.Errorf("%q: exit %d, printed %q, want \"[]\\n\"\n%s", args, code, out, errs)
		}
	}
	code, out, errs := ops(t, db, "status", "--json")
	var st map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || string(st["endpoints"]) != "[]" {
		t.Errorf("status --json: exit %d, endpoints %s, want []: %v\n%s%s", code, st["endpoints"], err, out, errs)
	}
	// A delivery enqueued and never attempted yet.
	db.Insert(t, "e", `{}`)
	var id string
	if err := db.Pool.QueryRow(context.Background(), "SELECT delivery_id::text FROM webhook_outbox").Scan(&id); err != nil {
		t.Fatal(err)
	}
	code, out, errs = ops(t, db, "attempts", id, "--json")
	var a map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &a); code != exitOK || err != nil || string(a["attempts"]) != "[]" || !strings.Contains(string(a["state"]), `"pending"`) {
		t.Errorf("attempts --json: exit %d: %v\n%s%s", code, err, out, errs)
	}
}

// A command that takes no positional argument refuses one, and one that
// takes one refuses two: exit 2 with the usage, nothing done.
func TestStrayArgumentsAreUsageErrors(t *testing.T) {
	t.Parallel()
	db, unchanged := opsInputFixture(t)
	for _, args := range [][]string{
		{"status", "foo"},
		{"status", "--json", "foo"},
		{"dlq", "list", "bar"},
		{"dlq", "list", "bar", "--json"},
		{"dlq", "purge", "--before", "1s", "--yes", "extra"},
		{"endpoints", "list", "x"},
		{"endpoints", "add", "--name", "n", "--url", "https://hooks.example.com/", "x"},
		{"endpoints", "update", "shop", "x", "--retry-rps", "9"},
		{"endpoints", "disable", "shop", "x"},
		{"endpoints", "enable", "shop", "x"},
		{"endpoints", "remove", "shop", "extra", "--force"},
		{"endpoints", "rotate-secret", "shop", "x"},
		{"attempts", idA, "extra"},
		{"migrate", "extra"},
		{"help", "bogus"},
	} {
		code, out, errs := ops(t, db, args...)
		if code != exitUsage || !strings.Contains(errs, "usage") {
			t.Errorf("%q: exit %d, want 2 with the usage:\n%s%s", args, code, out, errs)
		}
		unchanged(strings.Join(args, " "))
	}
	// migrate extra migrates nothing.
	empty := testdb.NewEmpty(t)
	if code, _, errs := ops(t, empty, "migrate", "extra"); code != exitUsage || !strings.Contains(errs, `unexpected argument "extra"`) {
		t.Fatalf("migrate extra: exit %d %s", code, errs)
	}
	if code, _, _ := ops(t, empty, "status"); code != exitSchema {
		t.Fatalf("after migrate extra: status exit %d, want 3 (not migrated)", code)
	}
}

// worker --help lists every command the dispatch knows, and each group's
// help every command of its group: both come from the same tables.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	top := topRunners()
	var names []string
	for _, c := range topCommands {
		names = append(names, c.name)
	}
	if got := slices.Sorted(maps.Keys(top)); !slices.Equal(got, slices.Sorted(slices.Values(append(names, "")))) {
		t.Fatalf("dispatch %v, help table %v", got, names)
	}
	runners := map[string]map[string]runFunc{"dlq": dlqRunners(), "endpoints": endpointsRunners(), "keys": keysRunners(),
		"event-types": eventTypesRunners()}
	if got := slices.Sorted(maps.Keys(runners)); !slices.Equal(got, slices.Sorted(maps.Keys(groups))) {
		t.Fatalf("groups %v, help groups %v", got, slices.Sorted(maps.Keys(groups)))
	}
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"--help"}, func(string) string { return "" }, &out, &errb); code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	help := out.String()
	for _, c := range topCommands {
		sub, isGroup := groups[c.name]
		if !isGroup {
			if !strings.Contains(help, "\n  "+c.name+" ") {
				t.Errorf("worker --help omits %s:\n%s", c.name, help)
			}
			continue
		}
		var subNames []string
		for _, s := range sub {
			subNames = append(subNames, s.name)
			if !strings.Contains(help, "\n  "+c.name+" "+s.name+" ") {
				t.Errorf("worker --help omits %s %s:\n%s", c.name, s.name, help)
			}
			var o, e strings.Builder
			code := run(context.Background(), []string{c.name, s.name, "--help"}, func(string) string { return "" }, &o, &e)
			if code != exitOK || !strings.Contains(e.String()+o.String(), "worker "+c.name+" "+s.name+" ") {
				t.Errorf("worker %s %s --help: exit %d, its usage line missing:\n%s%s", c.name, s.name, code, o.String(), e.String())
			}
		}
		if got := slices.Sorted(maps.Keys(runners[c.name])); !slices.Equal(got, slices.Sorted(slices.Values(subNames))) {
			t.Errorf("%s: dispatch %v, help %v", c.name, got, subNames)
		}
	}
	if !strings.Contains(help, "endpoints rotate-secret") {
		t.Errorf("worker --help omits endpoints rotate-secret:\n%s", help)
	}
}
