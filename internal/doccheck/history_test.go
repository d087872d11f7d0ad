package doccheck

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// history finds what belongs in git and the changelog, not in the user
// documentation: "issue 12", and commit hashes (7 to 40 lower-case hex
// digits with at least one digit and one letter, a whole word: a uuid's
// groups are joined by - and so are not one).
func history(text string) []string {
	var out []string
	for i, l := range strings.Split(text, "\n") {
		for _, m := range issueRef.FindAllString(l, -1) {
			out = append(out, strconv.Itoa(i+1)+": "+m)
		}
		for _, w := range word.FindAllString(l, -1) {
			if hexHash.MatchString(w) && strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdef") && !slices.Contains(notHashes, w) {
				out = append(out, strconv.Itoa(i+1)+": "+w)
			}
		}
	}
	return out
}

// notHashes are the words of the docs that read as a commit hash and are
// not one.
var notHashes = []string{"ed25519"}

var (
	issueRef = regexp.MustCompile(`(?i)\bissues?\s+#?\d+`)
	word     = regexp.MustCompile(`[0-9A-Za-z_-]+`)
	hexHash  = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
)

// README.md and docs/*.md name no issue number and no commit hash.
func TestDocsCarryNoIssueNumbersOrHashes(t *testing.T) {
	t.Parallel()
	dir := root(t)
	for _, f := range docFiles(t, dir) {
		for _, h := range history(read(t, filepath.Join(dir, f))) {
			t.Errorf("%s:%s: an issue number or commit hash; history belongs in git and CHANGELOG.md", f, h)
		}
	}
}

func TestHistoryIsFound(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"Fixed in issue 22 and Issues #7.",
		"Measured against 5c97906, and e2c18c2490fd4f.",
		"A uuid 1b4e28ba-2fa1-41d2-883f-0016d3cca427 and a key 20261206-3fa9c1 pass,",
		"so do 1000000, deadbeef, ed25519, fluxora_tmpl_0a1b2c3d4e5f and sha256 of 64 digits " + strings.Repeat("ab12", 16) + ".",
	}, "\n")
	got := history(text)
	want := []string{"1: issue 22", "1: Issues #7", "2: 5c97906", "2: e2c18c2490fd4f"}
	if !slices.Equal(got, want) {
		t.Errorf("history:\n got %q\nwant %q", got, want)
	}
}

// Each file of docs/ answers one task in at most 600 lines.
func TestDocsAreShort(t *testing.T) {
	t.Parallel()
	dir := root(t)
	for _, f := range docFiles(t, dir)[1:] {
		if n := strings.Count(read(t, filepath.Join(dir, f)), "\n"); n > 600 {
			t.Errorf("%s has %d lines; at most 600: split it by task", f, n)
		}
	}
}
