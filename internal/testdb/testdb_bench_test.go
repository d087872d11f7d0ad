package testdb

import "testing"

// BenchmarkNew measures one migrated database: go test -bench New -run '^$' ./internal/testdb/
func BenchmarkNew(b *testing.B) {
	for range b.N {
		New(b)
	}
}

// BenchmarkNewEmpty measures one empty database, for comparison.
func BenchmarkNewEmpty(b *testing.B) {
	for range b.N {
		NewEmpty(b)
	}
}
