package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docsConfiguration returns the rows of docs/configuration.md's tables:
// variable name to its default cell.
func docsConfiguration(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range configRow.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = strings.TrimSpace(m[2])
	}
	if len(out) == 0 {
		t.Fatal("docs/configuration.md has no table row | `NAME` | default | …")
	}
	return out
}

var configRow = regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\| ([^|]*) \\|")

// loader is one of the functions that read the environment: loadConfig
// (the worker), loadOpsConfig (the operator commands), loadConsoleEnv
// (worker console).
type loader struct {
	name string
	load func(getenv func(string) string) (any, error)
}

var loaders = []loader{
	{"loadConfig", func(g func(string) string) (any, error) { return loadConfig(g) }},
	{"loadOpsConfig", func(g func(string) string) (any, error) { return loadOpsConfig(g) }},
	{"loadConsoleEnv", func(g func(string) string) (any, error) { return loadConsoleEnv(g) }},
}

// documentedValue is the value a default cell stands for: `value`;
// `FORMULA` (value); `OTHER_VARIABLE`, that variable's value in base.
// ok is false for "unset" and "required", which name no value.
func documentedValue(t *testing.T, name, cell string, base map[string]string) (string, bool) {
	t.Helper()
	if m := computedDefault.FindStringSubmatch(cell); m != nil {
		return m[1], true
	}
	if m := literalDefault.FindStringSubmatch(cell); m != nil {
		if other, ok := base[m[1]]; ok {
			return other, true
		}
		return m[1], true
	}
	if cell != "unset" && cell != "required" {
		t.Errorf("%s: default %q is neither `value`, `formula` (value), unset nor required", name, cell)
	}
	return "", false
}

var (
	literalDefault  = regexp.MustCompile("^`([^`]+)`$")
	computedDefault = regexp.MustCompile("^`[^`]+` \\((\\d+)\\)$") // "`WEBHOOK_CONCURRENCY / 4` (25)"
)

// The defaults docs/configuration.md gives are the code's: set explicitly
// to the documented default, each variable yields, in every loader that
// reads it, the same configuration as unset. And every variable a loader
// reads has a row (internal/doccheck checks the same from the source, for
// every file of cmd/worker).
func TestConfigurationDefaultsMatchCode(t *testing.T) {
	t.Parallel()
	table := docsConfiguration(t)
	base := validEnv()
	// Tracing on: its variables are read only then.
	base["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
	readBy := map[string][]loader{}
	want := map[string]any{}
	for _, l := range loaders {
		got, err := l.load(func(k string) string {
			if !slices.ContainsFunc(readBy[k], func(x loader) bool { return x.name == l.name }) {
				readBy[k] = append(readBy[k], l)
			}
			return base[k]
		})
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		want[l.name] = got
	}
	for name := range readBy {
		if _, ok := table[name]; !ok {
			t.Errorf("the worker reads %s, which docs/configuration.md does not list", name)
		}
	}
	for name, cell := range table {
		v, ok := documentedValue(t, name, cell, base)
		if !ok {
			continue
		}
		if len(readBy[name]) == 0 {
			t.Errorf("docs/configuration.md gives a default for %s, which no loader reads", name)
		}
		env := map[string]string{name: v}
		for k, x := range base {
			if k != name {
				env[k] = x
			}
		}
		for _, l := range readBy[name] {
			got, err := l.load(func(k string) string { return env[k] })
			if err != nil {
				t.Errorf("%s: %s=%s (the documented default): %v", l.name, name, v, err)
				continue
			}
			if d := differingFields(got, want[l.name]); len(d) > 0 {
				t.Errorf("%s: %s=%s (the documented default) differs from the code's default in %v", l.name, name, v, d)
			}
		}
	}
}

// differingFields names the fields of two structs of one type that differ
// (never their values: some are secrets).
func differingFields(a, b any) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, va.Type().Field(i).Name)
		}
	}
	return out
}

// documentedCommands are the commands docs/operations.md gives a heading
// of its own: "worker dlq replay" for a heading ### `worker dlq replay`.
func documentedCommands(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range commandHeading.FindAllStringSubmatch(text, -1) {
		out[strings.TrimSpace(m[1])] = true
	}
	return out
}

var commandHeading = regexp.MustCompile("(?m)^#{2,4} `(worker(?: [a-z-]+)*)`")

// helpCommands are the commands `worker --help` lists, from the same
// tables: "worker" (the dispatcher), each command, each group's commands,
// and help.
func helpCommands() []string {
	out := []string{"worker"}
	for _, c := range topCommands {
		if sub, ok := groups[c.name]; ok {
			for _, s := range sub {
				out = append(out, "worker "+c.name+" "+s.name)
			}
			continue
		}
		out = append(out, "worker "+c.name)
	}
	return append(out, "worker help")
}

// Every command of `worker --help` has a heading of its own in
// docs/operations.md, and every command heading there is a command.
func TestOperationsDocumentsEveryCommand(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := documentedCommands(string(b))
	help := helpCommands()
	for _, c := range help {
		if !strings.Contains(usage, strings.TrimPrefix(strings.TrimPrefix(c, "worker"), " ")) {
			t.Fatalf("%q is not in worker --help: helpCommands is out of step with the help", c)
		}
		if !doc[c] {
			t.Errorf("worker --help lists %q, which docs/operations.md has no heading for (### `%s`)", c, c)
		}
	}
	for c := range doc {
		if !slices.Contains(help, c) {
			t.Errorf("docs/operations.md has a heading for %q, which worker --help does not list", c)
		}
	}
}
