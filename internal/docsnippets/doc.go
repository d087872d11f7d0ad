// Package docsnippets holds no code: its tests run the Go snippets of
// docs/consumers.md against requests signed by the worker's own sender, and
// check that every Go block of that page is, line for line, code they run.
package docsnippets
