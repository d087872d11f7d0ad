package main

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its test: every
// in-process worker, pool, listener, Redis client and HTTP server the tests
// start must be gone once they have stopped.
func TestMain(m *testing.M) {
	code := m.Run()
	removeKeyFile()
	if code == 0 {
		// Keep-alive connections of the tests' own HTTP client are not the
		// worker's.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
