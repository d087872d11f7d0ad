package outbox

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// appendByName reads columns by name, whatever their order, and refuses a
// column its row type does not read, or a field no column fills.
func TestAppendByName(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	read := func(sql string) ([]recorded, error) {
		t.Helper()
		rows, err := db.Pool.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		return appendByName[recorded](nil, rows, 1)
	}
	got, err := read("SELECT g AS id FROM generate_series(1, 3) g")
	if err != nil || len(got) != 3 || got[0].ID != 1 || got[2].ID != 3 {
		t.Fatalf("rows %v, %v", got, err)
	}
	if _, err := read("SELECT 1 AS ident"); err == nil || !strings.Contains(err.Error(), `column "ident"`) {
		t.Errorf("an unknown column: %v", err)
	}
	if _, err := read("SELECT 1 AS id, 2 AS more"); err == nil || !strings.Contains(err.Error(), "2 columns") {
		t.Errorf("a column too many: %v", err)
	}
	if _, err := read("SELECT 1/0 AS id"); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("a failing statement: %v, want its own error", err)
	}
}
