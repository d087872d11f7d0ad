// Package docsnippets holds no code: its tests run the Go snippets of
// docs/consumers.md (against requests signed by the worker's own sender)
// and docs/producers.md (on a migrated database), and check that every Go
// block of those pages is, line for line, code they run.
package docsnippets
