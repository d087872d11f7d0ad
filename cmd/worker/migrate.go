package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	schema "github.com/fluxora/webhook-worker/sql"
)

func runMigrate(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := loadDatabaseConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "worker migrate: configuration:\n%v\n", err)
		return exitUsage
	}
	pool, err := openPool(ctx, cfg, 2)
	if err != nil {
		fmt.Fprintf(stderr, "worker migrate: %v\n", err)
		return exitFailure
	}
	defer pool.Close()
	applied, err := schema.Migrate(ctx, pool)
	for _, v := range applied {
		fmt.Fprintf(stdout, "applied %s\n", v)
	}
	if err != nil {
		fmt.Fprintf(stderr, "worker migrate: %v\n", err)
		return exitFailure
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema is up to date")
	}
	return exitOK
}

// openPool connects an operator command (and migrate) to DATABASE_URL and
// checks the server answers. It works directly and through PgBouncer in
// transaction mode alike: no named prepared statement, no startup
// parameter but application_name, no session state. Errors never contain
// the connection string.
func openPool(ctx context.Context, cfg config, size int32) (*pgxpool.Pool, error) {
	pc, err := parsePool(cfg, size, pooledPath)
	if err != nil {
		return nil, err
	}
	return connectPool(ctx, pc)
}
