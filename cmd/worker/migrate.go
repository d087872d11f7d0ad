package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/dbconn"
	schema "github.com/fluxora/webhook-worker/sql"
)

const migrateUsage = `usage: worker migrate

Applies every migration of sql/migrations not applied yet, each in its own
transaction, and (re)creates the trigger: idempotent. DATABASE_URL names
the database. Exit codes: 0 ok, 1 failure, 2 usage or configuration.
`

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if code, ok := parseFlags(commandFlags("worker migrate", migrateUsage, stderr), args); !ok {
		return code
	}
	cfg, err := loadOpsConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "worker migrate: configuration:\n%v\n", err)
		return exitUsage
	}
	pool, err := openPool(ctx, cfg.DatabaseURL, 2)
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
func openPool(ctx context.Context, databaseURL string, size int32) (*pgxpool.Pool, error) {
	return dbconn.OpenPath(ctx, dbconn.Config{DatabaseURL: databaseURL, Size: size}, dbconn.Pooled)
}
