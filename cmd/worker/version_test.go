package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestVersionNamesTheBuild(t *testing.T) {
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != exitOK {
			t.Fatalf("worker %v: exit %d, stderr %q", args, code, stderr.String())
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "worker ") || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "revision ") {
			t.Fatalf("worker %v printed %q: want the version, the revision and %s", args, out, runtime.Version())
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Fatalf("worker version and worker --version differ: %q, %q", outs[0], outs[1])
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"version", "extra"}, func(string) string { return "" }, &bytes.Buffer{}, &stderr); code != exitUsage {
		t.Fatalf("worker version extra: exit %d, want %d", code, exitUsage)
	}
}

func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := readBuildInfo()
	b.register(reg)
	want := `
# HELP fluxora_webhook_build_info The running worker's build: module version, VCS revision and Go version; always 1.
# TYPE fluxora_webhook_build_info gauge
fluxora_webhook_build_info{goversion="` + b.GoVersion + `",revision="` + b.Revision + `",version="` + b.Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fluxora_webhook_build_info"); err != nil {
		t.Fatal(err)
	}
	if b.GoVersion != runtime.Version() {
		t.Fatalf("goversion label %q, want %q", b.GoVersion, runtime.Version())
	}
}
