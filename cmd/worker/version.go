package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// stampedVersion is the release's version, set at link time by
// scripts/image.sh and the release builds (-ldflags "-X
// main.stampedVersion=v1.2.3"); when set it wins over the module version
// the toolchain records, so that the binary, its image's tag and `worker
// version` name the same version. Empty in a plain go build.
var stampedVersion string

// buildInfo is what `worker version`, the start log line and the
// fluxora_webhook_build_info metric say of the running binary, read from
// the build information the Go toolchain stamps into it.
type buildInfo struct {
	Version   string // stampedVersion, else the module version; "devel" when neither is known
	Revision  string // VCS revision, "devel" when the build recorded none
	Time      string // VCS commit time, "devel" when the build recorded none
	Modified  bool   // the working tree had uncommitted changes
	GoVersion string
}

// readBuildInfo reads the binary's build information; a binary built
// without it (go run, some test binaries) says "devel" for what it lacks.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: cmp.Or(stampedVersion, "devel"), Revision: "devel", Time: "devel", GoVersion: "devel"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if v := bi.Main.Version; stampedVersion == "" && v != "" && v != "(devel)" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `worker version` prints.
func (b buildInfo) String() string {
	rev := b.Revision
	if b.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("worker %s, revision %s, built from a commit of %s, %s", b.Version, rev, b.Time, b.GoVersion)
}

// register adds fluxora_webhook_build_info{version,revision,goversion} 1,
// so that a dashboard tells which build each worker runs.
func (b buildInfo) register(reg prometheus.Registerer) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fluxora_webhook_build_info",
		Help:        "The running worker's build: module version, VCS revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	g.Set(1)
	reg.MustRegister(g)
}

// runVersion is `worker version` (and `worker --version`).
func runVersion(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(stdout, "usage: worker version\n\nPrints the worker's version, VCS revision and time, and Go version.\n")
			return exitOK
		}
		fmt.Fprintf(stderr, "worker version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	fmt.Fprintln(stdout, readBuildInfo())
	return exitOK
}
