// Command storefigures prints figures of how the store (package outbox)
// reads: its widest positional scan, its SQL joined with +, its exported
// SQL names and longest statement, and the module's type aliases. Each is
// one line, "figure: value (where)". It reports and does not judge: the
// exit status is 0 whatever the figures.
//
//	go run ./internal/storefigures [dir]
//
// It measures the module whose root is dir or, without one, the nearest
// directory at or above the current one with a go.mod. It reads the main
// module only: directories with a go.mod of their own (bench/, tools/),
// testdata, hidden directories, and _test.go files are left out.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root, err := moduleRoot(os.Args[1:])
	if err == nil {
		var r report
		if r, err = measure(root); err == nil {
			for _, line := range r.lines() {
				fmt.Println(line)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "storefigures: %v\n", err)
}

// moduleRoot is the directory given, or the nearest one with a go.mod at
// or above the working directory.
func moduleRoot(args []string) (string, error) {
	if len(args) > 1 {
		return "", errors.New("usage: storefigures [module root]")
	}
	if len(args) == 1 {
		return args[0], nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = up
	}
}
