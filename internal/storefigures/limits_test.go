package main

import (
	"testing"
)

// The store keeps to the limits it is judged by: statements a person can
// read, run and change. This reads the repository itself.
func TestTheStoreKeepsToItsLimits(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := measure(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		figure string
		sites  []site
		got    int
		most   int
	}{
		{"widest positional scan in outbox", largest(r.scans), n(largest(r.scans)), 8},
		{"type aliases outside tests", r.aliases, len(r.aliases), 2},
		{"exported SQL constants in the module", r.moduleSQL, len(r.moduleSQL), 2},
		{"SQL joined with + in outbox", r.joins, len(r.joins), 0},
		{"lines of the longest statement", largest(r.blocks), n(largest(r.blocks)), 120},
		{"lines of the longest SQL string in outbox's Go", largest(r.goStrings), n(largest(r.goStrings)), 0},
	} {
		if c.got > c.most {
			t.Errorf("%s: %d, at most %d: %s", c.figure, c.got, c.most, list(c.sites, whereAndName))
		}
	}
	if len(r.blocks) == 0 {
		t.Error("no statement found in outbox/queries")
	}
}
