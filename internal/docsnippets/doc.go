// Package docsnippets holds no code: its tests run the Go snippets of
// docs/consumers.md (against requests signed by the worker's own sender)
// and docs/producers.md (on a migrated database), and check that every Go
// block of those pages is, line for line, code they run; and they take
// the JavaScript and Python ed25519 blocks of docs/consumers.md from the
// page and run them with node and python3.
package docsnippets
