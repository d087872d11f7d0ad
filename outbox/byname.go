package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// querier runs a statement: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryOne runs sql with args and reads its one row by column name into a
// T (a struct whose db tags name the columns): pgx.ErrNoRows when it
// returns none.
func queryOne[T any](ctx context.Context, q querier, sql string, args pgx.NamedArgs) (T, error) {
	rows, err := q.Query(ctx, sql, args)
	if err != nil {
		var zero T
		return zero, err
	}
	return pgx.CollectOneRow(rows, pgx.RowToStructByName[T])
}

// queryAll runs sql with args and reads every row by column name into a T;
// none: an empty, non-nil list.
func queryAll[T any](ctx context.Context, q querier, sql string, args pgx.NamedArgs) ([]T, error) {
	rows, err := q.Query(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}

// fielder is a row type that names its fields by column: field returns
// the address of the field that column col is read into, or nil.
type fielder interface {
	field(col string) any
}

// appendByName reads every row into a T and appends it to out. Columns are
// matched to fields by name once per result (T's field method), then each
// row is scanned into them: the hot statements' rows are read by name at
// the cost of a positional scan. Every column must name a field, and
// every field of T (fields) must be a column.
func appendByName[T any, P interface {
	*T
	fielder
}](out []T, rows pgx.Rows, fields int) ([]T, error) {
	defer rows.Close()
	if err := rows.Err(); err != nil {
		// The statement failed before it returned a row (in a batch, one
		// before it did): there are no columns to read.
		return nil, err
	}
	var r T
	fds := rows.FieldDescriptions()
	if len(fds) != fields {
		// A statement that failed as it started has no columns yet: its
		// error is the answer.
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("the statement returns %d columns, its row type has %d fields", len(fds), fields)
	}
	dests := make([]any, len(fds))
	for i, fd := range fds {
		if dests[i] = P(&r).field(fd.Name); dests[i] == nil {
			return nil, fmt.Errorf("the statement returns column %q, which its row type does not read", fd.Name)
		}
	}
	for rows.Next() {
		var zero T
		r = zero // fresh slices for the []byte fields: pgx reuses none of them
		if err := rows.Scan(dests...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
