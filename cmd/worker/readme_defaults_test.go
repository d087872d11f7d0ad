package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeConfiguration returns the rows of README.md's configuration table:
// variable name to its default cell.
func readmeConfiguration(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "### Configuration")
	end := strings.Index(text[start+1:], "\n### ")
	if start < 0 || end < 0 {
		t.Fatal(`README.md has no "### Configuration" section`)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\| ([^|]*) \\|")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(text[start:start+1+end], -1) {
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

// The defaults README.md's configuration table gives are the code's: set
// explicitly to the README's default, each variable yields the same
// configuration as unset. And the table lists every variable the worker
// reads.
func TestREADMEDefaultsMatchCode(t *testing.T) {
	t.Parallel()
	table := readmeConfiguration(t)
	base := validEnv()
	var read []string
	want, err := loadConfig(func(k string) string { read = append(read, k); return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range read {
		if _, ok := table[name]; !ok {
			t.Errorf("the worker reads %s, which README.md's configuration table does not list", name)
		}
	}
	literal := regexp.MustCompile("^`([^`]+)`$")
	computed := regexp.MustCompile(`^` + "`[^`]+`" + ` \((\d+)\)$`) // "`WEBHOOK_CONCURRENCY / 4` (25)"
	for name, def := range table {
		var v string
		if m := literal.FindStringSubmatch(def); m != nil {
			v = m[1]
			if other, ok := base[v]; ok { // the default is another variable's value
				v = other
			}
		} else if m := computed.FindStringSubmatch(def); m != nil {
			v = m[1]
		} else if def == "unset" || def == "required" {
			continue
		} else {
			t.Errorf("%s: default %q is neither `value`, `formula` (value), unset nor required", name, def)
			continue
		}
		if !slices.Contains(read, name) {
			t.Errorf("README.md lists %s, which the worker does not read", name)
		}
		env := map[string]string{name: v}
		for k, x := range base {
			env[k] = x
		}
		got, err := loadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Errorf("%s=%s (README's default): %v", name, v, err)
			continue
		}
		if d := differingFields(got, want); len(d) > 0 {
			t.Errorf("%s=%s (README's default) differs from the code's default in %v", name, v, d)
		}
	}
}

// differingFields names the fields of two configs that differ (never their
// values: some are secrets).
func differingFields(a, b config) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, va.Type().Field(i).Name)
		}
	}
	return out
}
