package repocheck

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/release.sh makes every artifact of a release from one VERSION:
// the two static binaries (each for its architecture, the amd64 one
// naming the version), the image archive, the chart packaged with that
// version, and SHA256SUMS over them all.
func TestReleaseScriptStampsEveryArtifact(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	version := "v0.0.0-test." + strings.ToLower(rand.Text()[:8])
	dist := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "release.sh"), version)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DIST="+dist)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		_ = exec.Command("podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "rmi", "fluxora-webhook-worker:"+version).Run()
	})
	if err != nil {
		t.Fatalf("scripts/release.sh %s: %v\n%s", version, err, out)
	}
	dir := filepath.Join(dist, version)
	chart := "fluxora-webhook-worker-" + strings.TrimPrefix(version, "v") + ".tgz"
	want := []string{"SHA256SUMS", chart, "fluxora-webhook-worker-" + version + ".oci.tar", "worker-linux-amd64", "worker-linux-arm64"}
	for _, name := range want {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: missing or empty (%v); the release holds:\n%s", name, err, out)
		}
	}
	sums := exec.Command("sha256sum", "-c", "SHA256SUMS")
	sums.Dir = dir
	if b, err := sums.CombinedOutput(); err != nil || strings.Count(string(b), ": OK") != len(want)-1 {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, b)
	}
	for name, machine := range map[string]elf.Machine{"worker-linux-amd64": elf.EM_X86_64, "worker-linux-arm64": elf.EM_AARCH64} {
		f, err := elf.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		libs, _ := f.ImportedLibraries()
		if f.Machine != machine || len(libs) != 0 || f.Section(".interp") != nil {
			t.Errorf("%s: machine %v, want %v, statically linked", name, f.Machine, machine)
		}
		f.Close()
	}
	v, err := exec.Command(filepath.Join(dir, "worker-linux-amd64"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "worker "+version+",") {
		t.Fatalf("worker-linux-amd64 version: %q, %v; want it to name %s", v, err, version)
	}
	meta := chartYAML(t, filepath.Join(dir, chart))
	for _, line := range []string{"version: " + strings.TrimPrefix(version, "v"), "appVersion: " + version} {
		if !strings.Contains(meta, "\n"+line+"\n") && !strings.HasPrefix(meta, line+"\n") {
			t.Errorf("the packaged Chart.yaml lacks %q:\n%s", line, meta)
		}
	}
}

// chartYAML is Chart.yaml of the packaged chart at path.
func chartYAML(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no Chart.yaml in %s: %v", path, err)
		}
		if strings.HasSuffix(h.Name, "/Chart.yaml") && strings.Count(h.Name, "/") == 1 {
			meta, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(meta)
		}
	}
}
