package outbox

import (
	"context"

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
