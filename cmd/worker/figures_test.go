package main

import (
	"fmt"
	"os"
	"testing"
)

// figuresEnv names a file the fault tests append their figures to, one line
// each, prefixed with the test's name. scripts/test.sh sets it and prints
// the file after a passing run, so CI's log shows the suite's figures even
// though go test hides passing tests' logs.
const figuresEnv = "FLUXORA_FIGURES"

// figures logs a line of a fault test's figures and, when FLUXORA_FIGURES
// is set, appends it to that file. A failure to write the file fails the
// test: a report that silently lost lines would mislead.
func figures(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	path := os.Getenv(figuresEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("%s: %v", figuresEnv, err)
	}
	defer f.Close()
	// One write per line: lines of parallel tests do not interleave.
	if _, err := fmt.Fprintf(f, "%-36s %s\n", t.Name(), line); err != nil {
		t.Fatalf("%s: %v", figuresEnv, err)
	}
}
