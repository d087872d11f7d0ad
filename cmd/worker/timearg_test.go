package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The one duration parser of flags and variables: a value too large for
// time.Duration is out of range, never a wrapped-around (negative or
// small) duration.
func TestParseDurationRefusesOverflow(t *testing.T) {
	t.Parallel()
	s := span{max: 36500 * day}
	for _, tc := range []struct {
		v    string
		want time.Duration
		err  string // "" when accepted; "range" out of range; "syntax" not a duration
	}{
		{"0", 0, ""},
		{"90m", 90 * time.Minute, ""},
		{"24h", 24 * time.Hour, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"7d", 7 * day, ""},
		{"36500d", 36500 * day, ""},
		{"36501d", 0, "range"},
		{"106752d", 0, "range"},              // overflows time.Duration when multiplied out
		{"9223372036854775807d", 0, "range"}, // overflows int64 days * 24h
		{"99999999999999999999d", 0, "range"},
		{"9999999999h", 0, "range"}, // overflows time.Duration in ParseDuration
		{"99999999999999999999s", 0, "range"},
		{"-5m", 0, "range"},
		{"1e30s", 0, "syntax"},
		{"-7d", 0, "syntax"},
		{"7days", 0, "syntax"},
		{"d", 0, "syntax"},
		{"soon", 0, "syntax"},
	} {
		d, err := parseDuration(tc.v, s)
		switch {
		case tc.err == "" && (err != nil || d != tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.v, d, err, tc.want)
		case tc.err == "range" && !errors.Is(err, errOutOfRange):
			t.Errorf("%q: %v, %v; want out of range", tc.v, d, err)
		case tc.err == "syntax" && (err == nil || errors.Is(err, errOutOfRange)):
			t.Errorf("%q: %v, %v; want not a duration", tc.v, d, err)
		case tc.err != "" && !strings.Contains(err.Error(), "from 0 to 36500d"):
			t.Errorf("%q: %v does not give the range", tc.v, err)
		}
	}
	if _, err := parseDuration("30s", span{min: time.Minute, max: day, zeroOff: true}); err == nil || !strings.Contains(err.Error(), "from 1m to 1d, or 0 (off)") {
		t.Errorf("below the minimum: %v", err)
	}
	if d, err := parseDuration("0s", span{min: time.Minute, max: day, zeroOff: true}); err != nil || d != 0 {
		t.Errorf("0s with zeroOff: %v %v", d, err)
	}
}

func TestParseTimeBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if got, err := parseTime("7d", now); err != nil || !got.Equal(now.Add(-7*day)) {
		t.Fatalf("7d: %v %v", got, err)
	}
	for _, v := range []string{"106752d", "9999999999h", "36501d"} {
		got, err := parseTime(v, now)
		if err == nil || !strings.Contains(err.Error(), "out of range") || !strings.Contains(err.Error(), "36500d") {
			t.Errorf("%s: %v, %v; want out of range", v, got, err)
		}
	}
	if _, err := parseTime("1e30s", now); err == nil || !strings.Contains(err.Error(), "not a time") {
		t.Errorf("1e30s: %v", err)
	}
}
