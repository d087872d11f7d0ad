// Command worker delivers the rows of webhook_outbox as signed HTTP POSTs.
//
//	worker            run the dispatcher (configuration from the environment)
//	worker migrate    create or upgrade the tables and the trigger
//	worker status     show the outbox at a glance
//	worker dlq ...    list, replay and purge dead letters
//	worker endpoints ... add, list, update, disable, enable, remove endpoints
//
// Exit codes: 0 success; 1 runtime failure (database unreachable, shutdown
// timeout exceeded); 2 bad usage or configuration; 3 schema not migrated.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitSchema  = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: worker [command]

Commands:
  (none)    run the dispatcher
  migrate   apply every migration and trigger (idempotent)
  status    pending, scheduled, oldest age, dead letters, workers [--json]
  dlq       list, replay and purge dead letters (worker dlq --help)
  endpoints add, list, update, disable, enable, remove endpoints (worker endpoints --help)
  attempts  every attempt of one delivery, across retries and replays (worker attempts --help)
  help      show this text

Configuration comes from the environment; see README.md.
`

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "":
		return runDispatcher(ctx, getenv, stderr)
	case "migrate":
		return runMigrate(ctx, getenv, stdout, stderr)
	case "status":
		return runStatus(ctx, args, getenv, stdout, stderr)
	case "dlq":
		return runDLQ(ctx, args, getenv, stdout, stderr)
	case "endpoints":
		return runEndpoints(ctx, args, getenv, stdout, stderr)
	case "attempts":
		return runAttempts(ctx, args, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "worker: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}
