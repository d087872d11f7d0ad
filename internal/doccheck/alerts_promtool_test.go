package doccheck

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// promtool is Debian's (package prometheus); scripts/services.sh installs
// it. Missing, the test fails: it never skips.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not on PATH: install Debian's prometheus package or run scripts/services.sh")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Join(root(t), "deploy", "prometheus")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
}

func TestRulesPassPromtoolCheck(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "rules", "alerts.yml")
}

func TestRulesPassTheirUnitTests(t *testing.T) {
	t.Parallel()
	promtool(t, "test", "rules", "alerts_test.yml")
}
