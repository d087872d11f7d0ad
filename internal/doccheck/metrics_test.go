package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// metricNames are the metric names registered by the Go code (tests and
// the bench module aside): string literals "fluxora_webhook_…" that do not
// end in "_" (a prefix, not a metric).
func metricNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && p != dir {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range metricLiteral.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	metricLiteral = regexp.MustCompile(`"(fluxora_webhook_[a-z0-9_]*[a-z0-9])"`)
	metricRow     = regexp.MustCompile("(?m)^\\| `(fluxora_webhook_[a-z0-9_]+)")
)

// Every metric the code registers has a row in docs/operations.md's
// metric tables, and every row names a metric the code registers.
func TestOperationsDocumentsEveryMetric(t *testing.T) {
	t.Parallel()
	dir := root(t)
	code := metricNames(t, dir)
	if len(code) < 30 {
		t.Fatalf("found only %d metric names in the code: the scan is broken", len(code))
	}
	doc := map[string]bool{}
	for _, m := range metricRow.FindAllStringSubmatch(read(t, filepath.Join(dir, "docs", "operations.md")), -1) {
		doc[m[1]] = true
	}
	for m := range code {
		if !doc[m] {
			t.Errorf("the code registers %s, which docs/operations.md's metric tables do not list", m)
		}
	}
	for m := range doc {
		if !code[m] {
			t.Errorf("docs/operations.md lists %s, which the code does not register", m)
		}
	}
}
