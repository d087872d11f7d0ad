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

// openPool connects to DATABASE_URL and checks the server answers. Errors
// never contain the connection string.
func openPool(ctx context.Context, cfg config, size int32, params ...string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	pc.MaxConns = size
	pc.ConnConfig.RuntimeParams["application_name"] = "fluxora-webhook-worker"
	for i := 0; i+1 < len(params); i += 2 {
		pc.ConnConfig.RuntimeParams[params[i]] = params[i+1]
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return pool, nil
}
