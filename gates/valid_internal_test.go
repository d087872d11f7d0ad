package gates

import (
	"testing"
	"time"
)

// A reply of the wrong shape or types is an error, never a panic.
func TestParseRepliesCheckTypes(t *testing.T) {
	t.Parallel()
	ok := []any{int64(0), int64(2), int64(1500), int64(0), "", "", int64(0)}
	if c, err := parseCheck(ok); err != nil || c.allow || c.reason != ReasonCircuitOpen || c.deferMS != 1500 {
		t.Fatalf("valid reply: %+v %v", c, err)
	}
	with := func(i int, v any) []any { r := append([]any(nil), ok...); r[i] = v; return r }
	for name, r := range map[string][]any{
		"short":                  ok[:6],
		"long":                   append(append([]any(nil), ok...), int64(0)),
		"allow a string":         with(0, "1"),
		"allow 2":                with(0, int64(2)),
		"reason unknown":         with(1, int64(9)),
		"refused without reason": with(1, int64(0)),
		"allowed with a reason":  append([]any{int64(1)}, ok[1:]...),
		"defer a string":         with(2, "1e300"),
		"defer nil":              with(2, nil),
		"probe 5":                with(3, int64(5)),
		"from not a state":       with(4, "ajar"),
		"to an integer":          with(5, int64(1)),
		"invalid flags unknown":  with(6, int64(8)),
		"invalid flags a string": with(6, "1"),
		"an error value inside":  with(2, []any{"x"}),
	} {
		if _, err := parseCheck(r); err == nil {
			t.Errorf("%s: no error for %v", name, r)
		}
	}
	for name, r := range map[string][]any{
		"short":          {"closed", "open"},
		"from empty":     {"", "open", int64(0)},
		"to unknown":     {"closed", "ajar", int64(0)},
		"from a number":  {int64(1), "open", int64(0)},
		"invalid 2":      {"closed", "open", int64(2)},
		"invalid string": {"closed", "open", "0"},
	} {
		if _, _, _, err := parseRecord(r); err == nil {
			t.Errorf("record %s: no error for %v", name, r)
		}
	}
	if f, to, bad, err := parseRecord([]any{"closed", "open", int64(1)}); err != nil || f != "closed" || to != "open" || !bad {
		t.Fatalf("valid record reply: %s %s %v %v", f, to, bad, err)
	}
}

func TestParseState(t *testing.T) {
	t.Parallel()
	latest := time.UnixMilli(2_000_000)
	for raw, want := range map[string]bool{
		`{"state":"open","failures":3,"resetAt":2000000}`: true,
		`{"state":"half-open","failures":0,"resetAt":0}`:  true,
		`{"state":"open","failures":3,"resetAt":2000001}`: false,
		`{"state":"open","failures":3,"resetAt":1e300}`:   false,
		`{"state":"open","failures":3,"resetAt":-1}`:      false,
		`{"state":"open","failures":3,"resetAt":"NaN"}`:   false,
		`{"state":"open","failures":3}`:                   false,
		`{"state":"closed","failures":1.5,"resetAt":0}`:   false,
		`{"state":"closed","failures":-1,"resetAt":0}`:    false,
		`{"state":"closed","failures":1e10,"resetAt":0}`:  false,
		`{"state":"Closed","failures":0,"resetAt":0}`:     false,
		`{"state":null,"failures":0,"resetAt":0}`:         false,
		`[]`: false, `null`: false, `7`: false, ``: false, `{`: false,
	} {
		if _, ok := parseState([]byte(raw), latest); ok != want {
			t.Errorf("parseState(%s) ok = %v, want %v", raw, ok, want)
		}
	}
}
