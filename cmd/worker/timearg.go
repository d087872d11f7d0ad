package main

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// day is the unit of the "7d" spelling.
const day = 24 * time.Hour

// span is the values a duration flag or variable accepts: from min to max,
// and 0 (off) below min when zeroOff is set.
type span struct {
	min, max time.Duration
	zeroOff  bool
}

// ageSpan is the age a time flag accepts (--before 7d): at most 100 years.
var ageSpan = span{max: 36500 * day}

func (s span) String() string {
	r := "from " + shortDuration(s.min) + " to " + shortDuration(s.max)
	if s.zeroOff {
		r += ", or 0 (off)"
	}
	return r
}

// shortDuration writes d in the largest whole unit: 30d, 24h, 90m, 1s.
func shortDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d != 0 && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	if d == 0 {
		return "0"
	}
	return d.String()
}

// goDuration is the syntax time.ParseDuration accepts, unsigned: a value
// of that shape it refuses has overflowed.
var goDuration = regexp.MustCompile(`^((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// errOutOfRange marks a duration that is well formed but outside its span
// (overflow included).
var errOutOfRange = errors.New("out of range")

// parseDuration reads the one duration syntax of flags and variables: a Go
// duration (90m, 24h, 1h30m) or whole days (7d); "0" is 0. A value outside
// s, including one too large for time.Duration (106752d, 9999999999h), is
// an error wrapping errOutOfRange, never a wrapped-around duration. The
// error does not quote v: the caller names the flag or variable and v.
func parseDuration(v string, s span) (time.Duration, error) {
	v = strings.TrimSpace(v)
	outOfRange := fmt.Errorf("%w: must be %s", errOutOfRange, s)
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > int64(s.max/day) {
			return 0, outOfRange
		}
		d = time.Duration(n) * day
	} else if v != "0" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			if goDuration.MatchString(strings.TrimPrefix(v, "+")) {
				return 0, outOfRange
			}
			return 0, fmt.Errorf("not a duration: use 90m, 24h or 7d, %s", s)
		}
	}
	if d == 0 && s.zeroOff {
		return 0, nil
	}
	if d < s.min || d > s.max {
		return 0, outOfRange
	}
	return d, nil
}

// parseTime reads a time argument: RFC 3339 (2026-12-01T00:00:00Z), a date
// (2026-12-01, UTC midnight), or an age before now (90m, 24h, 7d) of at
// most 36500d.
func parseTime(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	d, err := parseDuration(v, ageSpan)
	if errors.Is(err, errOutOfRange) {
		return time.Time{}, fmt.Errorf("out of range: an age must be %s", ageSpan)
	} else if err != nil {
		return time.Time{}, errors.New("not a time: use RFC 3339 (2026-12-01T00:00:00Z), a date (2026-12-01) or an age (24h, 7d)")
	}
	return now.Add(-d), nil
}

// durationFlag is a duration flag that accepts only its span: a value
// outside it fails the parse, before the command does anything.
type durationFlag struct {
	d    time.Duration
	span span
}

func (f *durationFlag) String() string { return shortDuration(f.d) }

func (f *durationFlag) Set(v string) error {
	d, err := parseDuration(v, f.span)
	if err != nil {
		return err
	}
	f.d = d
	return nil
}

// spanFlag defines a duration flag (90m, 24h, 7d) limited to s.
func spanFlag(fs *flag.FlagSet, name string, def time.Duration, s span, usage string) *time.Duration {
	f := &durationFlag{d: def, span: s}
	fs.Var(f, name, usage+" ("+s.String()+")")
	return &f.d
}

// intFlag is a whole-number flag limited to lo..hi.
type intFlag struct {
	n, lo, hi int
}

func (f *intFlag) String() string { return strconv.Itoa(f.n) }

func (f *intFlag) Set(v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < f.lo || n > f.hi {
		return fmt.Errorf("must be a whole number from %d to %d", f.lo, f.hi)
	}
	f.n = n
	return nil
}

// rangeFlag defines an int flag limited to lo..hi.
func rangeFlag(fs *flag.FlagSet, name string, def, lo, hi int, usage string) *int {
	f := &intFlag{n: def, lo: lo, hi: hi}
	fs.Var(f, name, fmt.Sprintf("%s (%d to %d)", usage, lo, hi))
	return &f.n
}

// timeFlag is a time flag (RFC 3339, a date, or an age before now):
// parsed, and range-checked, with the other flags.
type timeFlag struct {
	t   time.Time
	set bool
	now func() time.Time
}

func (f *timeFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.t.UTC().Format(time.RFC3339)
}

func (f *timeFlag) Set(v string) error {
	t, err := parseTime(v, f.now())
	if err != nil {
		return err
	}
	f.t, f.set = t, true
	return nil
}

// ptr is the time given, or nil when the flag was not.
func (f *timeFlag) ptr() *time.Time {
	if !f.set {
		return nil
	}
	return &f.t
}

// timeArgFlag defines a time flag; its set field says whether it was given.
func timeArgFlag(fs *flag.FlagSet, name, usage string) *timeFlag {
	f := &timeFlag{now: time.Now}
	fs.Var(f, name, usage+": RFC 3339, a date (2026-12-01) or an age (24h, 7d; at most 36500d)")
	return f
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
