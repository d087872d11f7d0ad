package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// command is one line of a help text: a command's name, its arguments
// and flags, and what it does.
type command struct {
	name, args, summary string
}

// synopsis is the usage lines of the commands of prog ("worker dlq").
func synopsis(prog string, cmds []command) string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, c := range cmds {
		b.WriteString("  " + strings.TrimSpace(prog+" "+c.name+" "+c.args) + "\n")
	}
	return b.String()
}

// columns lays rows out as two aligned columns, indented by two spaces.
func columns(rows [][2]string) string {
	w := 0
	for _, r := range rows {
		w = max(w, len(r[0]))
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("  " + r[0] + strings.Repeat(" ", w-len(r[0])+2) + r[1] + "\n")
	}
	return b.String()
}

// printJSON writes list as one JSON array and a newline: [] when empty,
// never nothing or null.
func printJSON[T any](stdout, stderr io.Writer, cmd string, list []T) int {
	if list == nil {
		list = []T{}
	}
	if err := json.NewEncoder(stdout).Encode(list); err != nil {
		fmt.Fprintf(stderr, "worker %s: %v\n", cmd, err)
		return exitFailure
	}
	return exitOK
}
