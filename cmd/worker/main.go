// Command worker delivers the rows of webhook_outbox as signed HTTP POSTs.
//
//	worker            run the dispatcher (configuration from the environment)
//	worker migrate    create or upgrade the tables and the trigger
//	worker status     show the outbox at a glance
//	worker dlq ...    list, replay and purge dead letters
//	worker endpoints ... add, list, update, disable, enable, remove endpoints, rotate their secrets
//	worker event-types ... the event catalog: types, their schemas, strict mode, the OpenAPI export
//	worker attempts   every attempt of one delivery
//	worker keys ...   generate a key, re-encrypt the stored secrets
//	worker console    the operator console in the browser
//	worker version    the build: version, VCS revision and time, Go version
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

// runFunc runs one command with the arguments after its name.
type runFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int

// topCommands are the commands of worker, in the order of the help; dlq
// and endpoints list their own (dlqCommands, endpointsCommands).
var topCommands = []command{
	{"migrate", "", "apply every migration and trigger (idempotent)"},
	{"status", "[--endpoint NAME] [--json]", "pending, scheduled, oldest age, dead letters, workers, endpoints"},
	{"dlq", "", "dead letters"},
	{"endpoints", "", "the endpoints of webhook_endpoints"},
	{"event-types", "", "the event catalog: types, their schemas, strict mode"},
	{"attempts", "DELIVERY_ID [--json]", "every attempt of one delivery, across retries and replays"},
	{"keys", "", "the key file that encrypts the stored secrets"},
	{"console", "[--addr HOST:PORT]", "serve the operator console (WEBHOOK_CONSOLE_TOKEN_FILE required)"},
	{"version", "", "the worker's version, VCS revision and Go version"},
}

// topRunners dispatches the commands of topCommands ("" runs the
// dispatcher).
func topRunners() map[string]runFunc {
	return map[string]runFunc{
		"": func(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) int {
			if len(args) > 0 {
				fmt.Fprintf(stderr, "worker: unexpected argument %q\n\n%s", args[0], usage)
				return exitUsage
			}
			return runDispatcher(ctx, getenv, stderr)
		},
		"migrate": runMigrate, "status": runStatus, "dlq": runDLQ, "endpoints": runEndpoints, "attempts": runAttempts,
		"keys": runKeys, "event-types": runEventTypes,
		"console": runConsole, "version": runVersion,
	}
}

// groups are the commands that have commands of their own.
var groups = map[string][]command{"dlq": dlqCommands, "endpoints": endpointsCommands, "keys": keysCommands,
	"event-types": eventTypesCommands}

var usage = topUsage()

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help", "-h", "--help":
		return runHelp(ctx, args, getenv, stdout, stderr)
	case "--version":
		return runVersion(ctx, args, getenv, stdout, stderr)
	}
	if r, ok := topRunners()[cmd]; ok {
		return r(ctx, args, getenv, stdout, stderr)
	}
	fmt.Fprintf(stderr, "worker: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// runHelp is `worker help [COMMAND...]`: this text, or that command's.
func runHelp(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if _, ok := topRunners()[args[0]]; !ok || args[0] == "" {
		fmt.Fprintf(stderr, "worker help: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return run(ctx, append(append([]string{}, args...), "--help"), getenv, stdout, stderr)
}

// topUsage is the text of worker --help: every command and subcommand.
func topUsage() string {
	var rows [][2]string
	rows = append(rows, [2]string{"(none)", "run the dispatcher"})
	for _, c := range topCommands {
		if sub, ok := groups[c.name]; ok {
			for _, s := range sub {
				rows = append(rows, [2]string{c.name + " " + s.name, s.summary})
			}
			continue
		}
		rows = append(rows, [2]string{c.name, c.summary})
	}
	rows = append(rows, [2]string{"help [COMMAND]", "show this text, or that command's"})
	return "usage: worker [command]\n\nCommands:\n" + columns(rows) +
		"\n`worker COMMAND --help` shows a command's arguments and flags.\nConfiguration comes from the environment; see docs/configuration.md.\n"
}
