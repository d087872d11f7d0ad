// Command chartpkg packages a Helm chart with its version and appVersion
// set, as `helm package --version V --app-version V` does, for the release
// script: the helm command's own dependencies are not in this module.
//
//	go run ./cmd/chartpkg CHART_DIR VERSION OUT_DIR
package main

import (
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: chartpkg CHART_DIR VERSION OUT_DIR")
		os.Exit(2)
	}
	dir, version, out := os.Args[1], os.Args[2], os.Args[3]
	c, err := loader.Load(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chartpkg: load %s: %v\n", dir, err)
		os.Exit(1)
	}
	// A chart's version is SemVer without the tag's leading v.
	c.Metadata.Version = strings.TrimPrefix(version, "v")
	c.Metadata.AppVersion = version
	if err := c.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "chartpkg: %s: %v\n", dir, err)
		os.Exit(1)
	}
	path, err := chartutil.Save(c, out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chartpkg: save: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
