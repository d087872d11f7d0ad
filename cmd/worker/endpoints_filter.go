package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// filterUsage is --filter's help (docs/endpoints.md, "Payload filters").
const filterUsage = "a PostgreSQL jsonpath, e.g. '$.amount ? (@ >= 100)': the endpoint takes an event of its types only" +
	" when the filter finds something in its payload (default: every event of its types)"

// filterFlags are --filter, and on update --no-filter.
type filterFlags struct {
	filter   *string
	noFilter *bool
}

func newFilterFlags(fs *flag.FlagSet, update bool) *filterFlags {
	f := &filterFlags{filter: fs.String("filter", "", filterUsage)}
	if update {
		f.noFilter = fs.Bool("no-filter", false, "remove the payload filter: every event of its types")
	}
	return f
}

// value is the filter given (nil: none given, "" on update: remove it);
// exitUsage (said on stderr) for an empty --filter, or --filter beside
// --no-filter. Whether it is jsonpath the database says (endpoints).
func (f *filterFlags) value(fs *flag.FlagSet, cmd string, stderr io.Writer) (*string, int) {
	given := flagGiven(fs, "filter")
	switch {
	case given && f.noFilter != nil && *f.noFilter:
		fmt.Fprintf(stderr, "worker endpoints %s: give --filter or --no-filter, not both\n", cmd)
		return nil, exitUsage
	case given && strings.TrimSpace(*f.filter) == "":
		fmt.Fprintf(stderr, "worker endpoints %s: --filter: empty (omit it, or on update give --no-filter, for every event of its types)\n", cmd)
		return nil, exitUsage
	case given:
		return f.filter, exitOK
	case f.noFilter != nil && *f.noFilter:
		none := ""
		return &none, exitOK
	}
	return nil, exitOK
}

// filterText is a payload filter as list and status show it: "-" for none.
func filterText(filter string) string {
	if filter == "" {
		return "-"
	}
	return cell(filter)
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// filterNote is what add and update say of the filter given: "" when
// none was.
func filterNote(filter *string) string {
	switch {
	case filter == nil:
		return ""
	case *filter == "":
		return ", no payload filter"
	}
	return ", payload filter " + cell(strings.TrimSpace(*filter))
}
