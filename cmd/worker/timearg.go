package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseTimeArg reads a time flag value: RFC 3339 (2026-12-01T00:00:00Z), a
// date (2026-12-01, UTC midnight), or an age before now (90m, 24h, 7d).
func parseTimeArg(name, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	} else if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s: %q is not a time: use RFC 3339 (2026-12-01T00:00:00Z), a date (2026-12-01) or an age (24h, 7d)", name, v)
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
