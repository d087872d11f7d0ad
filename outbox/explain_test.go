package outbox_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// buffersLine is the first Buffers line of an EXPLAIN (ANALYZE, BUFFERS)
// plan: its top node's, the whole statement's.
var buffersLine = regexp.MustCompile(`Buffers: shared((?: \w+=\d+)+)`)

// touched is what an EXPLAIN (ANALYZE, BUFFERS) plan says its statement
// touched: the shared hits and reads of its top node; ok is false when
// the plan has no Buffers line (a statement that touched no buffer).
func touched(plan string) (n int, ok bool) {
	m := buffersLine.FindStringSubmatch(plan)
	if m == nil {
		return 0, false
	}
	for _, kv := range strings.Fields(m[1]) {
		if k, v, _ := strings.Cut(kv, "="); k == "hit" || k == "read" {
			b, _ := strconv.Atoi(v)
			n += b
		}
	}
	return n, true
}

// buffers is touched for a plan that must have touched buffers: it fails
// the test when the plan says nothing of them.
func buffers(t *testing.T, plan string) int {
	t.Helper()
	n, ok := touched(plan)
	if !ok {
		t.Fatalf("no buffers in the plan:\n%s", plan)
	}
	return n
}
