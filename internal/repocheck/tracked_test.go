// Package repocheck holds checks on the repository itself: what is
// tracked, not what the worker does.
package repocheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTracked is the largest file the repository may track: sources,
// schema and documents stay far below it; a binary or a dump does not.
const maxTracked = 1 << 20

// TestNoLargeTrackedFiles fails on a tracked file over 1 MiB (the
// screenshots of docs/ aside), so that a build output committed by mistake
// is caught before it lands.
func TestNoLargeTrackedFiles(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 10 {
		t.Fatalf("git ls-files listed %d files: not the repository", len(files))
	}
	for _, f := range files {
		if strings.HasPrefix(f, "docs/") && strings.HasSuffix(f, ".png") {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxTracked {
			t.Errorf("%s is tracked and %d bytes (over %d): build outputs belong in .gitignore", f, fi.Size(), maxTracked)
		}
	}
}

// repoRoot is the top of the git checkout the suite runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v (the suite runs in a git checkout)", err)
	}
	return strings.TrimSpace(string(top))
}
