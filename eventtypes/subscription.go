package eventtypes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fluxora/webhook-worker/webhook"
)

// CheckSubscription checks an endpoint's subscription (its event types,
// each a type or a pattern ending in "*") against the catalog, when the
// catalog lists a type: each type must be known (Known: listed, or the
// worker's own), each pattern must match at least one listed type (a
// pattern of the worker's own, "fluxora.…*", is always accepted). The
// error names the first culprit and, when a listed type is close to it,
// suggests that one: "unknown event type invoice.payed (did you mean
// invoice.paid?)". An empty subscription (every type) is always accepted.
func (c *Catalog) CheckSubscription(subscription []string) error {
	return CheckSubscription(c.names, subscription)
}

// CheckSubscription is Catalog.CheckSubscription on the catalog's names
// (a caller that needs no schema reads only those).
func CheckSubscription(names, subscription []string) error {
	if len(names) == 0 {
		return nil
	}
	l := listed(slices.Sorted(slices.Values(names)))
	for _, s := range subscription {
		if err := l.checkOne(s); err != nil {
			return err
		}
	}
	return nil
}

// listed are a catalog's names, sorted byte by byte.
type listed []string

func (l listed) known(name string) bool {
	_, ok := slices.BinarySearch(l, name)
	return ok || strings.HasPrefix(name, webhook.OperatorTypes)
}

func (l listed) checkOne(s string) error {
	prefix, pattern := strings.CutSuffix(s, "*")
	switch {
	case !pattern && l.known(s):
		return nil
	case !pattern:
		return fmt.Errorf("unknown event type %s%s", s, didYouMean(s, l))
	case strings.HasPrefix(prefix, webhook.OperatorTypes) || l.matches(prefix):
		return nil
	}
	return fmt.Errorf("pattern %s matches no event type of the catalog%s", s, didYouMean(s, l.segmentPatterns()))
}

// segmentPatterns are the patterns that end at a "." of a listed type
// ("invoice.*" of "invoice.paid"), sorted, each once: what a pattern that
// matches nothing was probably meant to be.
func (l listed) segmentPatterns() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range l {
		for i, r := range n {
			if p := n[:i+1] + "*"; r == '.' && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// matches reports whether a listed type starts with prefix, as
// webhook_subscribed matches a pattern.
func (l listed) matches(prefix string) bool {
	for _, n := range l {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// didYouMean is " (did you mean X?)" for the candidate closest to s by
// edit distance, when it is close enough to be a typing slip (at most a
// quarter of s's length, and at least 1), else "". Of equally close ones,
// the first in candidates' order.
func didYouMean(s string, candidates []string) string {
	best, bestD := "", max(len([]rune(s))/4, 1)+1
	for _, c := range candidates {
		if d := distance(s, c); d < bestD && c != s {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// distance is the Levenshtein distance of a and b, in runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
