package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fluxora/webhook-worker/eventtypes"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// eventTypesCommands are the commands of worker event-types, in the order
// of the help; eventTypesRunners dispatches them.
var eventTypesCommands = []command{
	{"add", "NAME [--description D] [--schema-file F] [--example-file F] [--deprecated]", "add a type to the event catalog"},
	{"update", "NAME [--description D] [--schema-file F | --no-schema] [--example-file F | --no-example] [--deprecated=true|false]",
		"change a type's description, schema, example or deprecation"},
	{"list", "[--json]", "every type of the catalog, and strict mode"},
	{"remove", "NAME", "remove a type from the catalog"},
	{"strict", "[on|off]", "refuse producers' events of types not in the catalog (or say whether it does)"},
	{"export", "--format openapi [--title T] [--version V]", "the catalog as an OpenAPI 3.1 document, for consumers"},
}

func eventTypesRunners() map[string]runFunc {
	return map[string]runFunc{
		"add": eventTypesAdd, "update": eventTypesUpdate, "list": eventTypesList, "remove": eventTypesRemove,
		"strict": eventTypesStrict, "export": eventTypesExport,
	}
}

var eventTypesUsage = synopsis("worker event-types", eventTypesCommands) + `
The event catalog lists the event types producers write: a description, a
JSON Schema of the payload (draft 2020-12 unless its "$schema" says
otherwise; a "$ref" only within the schema) and an example, which must
match it. Types may not hold "*" nor start with "fluxora." (the worker's
own, always known). Schemas and examples are files of JSON (--schema-file
/dev/stdin for a pipe).

While the catalog lists a type, endpoints' subscriptions are checked
against it (worker endpoints add|update --events). The worker checks each
delivery's payload against its type's schema before its first attempt
and dead-letters one that does not match, unsent; the Go producer kit
checks before inserting (producer.WithCatalog). strict on makes the
database refuse a producer's event of a type the catalog does not list,
in the producer's transaction; the worker dead-letters such deliveries
too. Changes reach running workers within a second.

export --format openapi prints an OpenAPI 3.1 document (JSON, which is
YAML too): its webhooks list every type with its schema and example, its
security schemes the signature headers.
Exit codes: 0 ok, 1 failure (database, unknown or taken type), 2 usage or
a bad value (nothing is changed), 3 not migrated.
`

func runEventTypes(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runGroup(ctx, "event-types", eventTypesRunners(), eventTypesUsage, args, getenv, stdout, stderr)
}

func eventTypesFlags(name string, stderr io.Writer) *flag.FlagSet {
	return commandFlags("worker event-types "+name, eventTypesUsage, stderr)
}

// eventTypesStore connects and returns the store, or nil and the exit
// code.
func eventTypesStore(ctx context.Context, getenv func(string) string, stderr io.Writer, name string) (*outbox.Store, func(), int) {
	_, store, done, code := opsConnectStore(ctx, getenv, stderr, "event-types "+name)
	return store, done, code
}

// eventTypesFail prints err and returns its exit code: 1, or 2 for a value
// the database refused (a constraint of webhook_event_types).
func eventTypesFail(stderr io.Writer, cmd string, err error) int {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		fmt.Fprintf(stderr, "worker event-types %s: the type exists (worker event-types update changes it)\n", cmd)
	case errors.As(err, &pgErr) && pgErr.Code == "23514":
		fmt.Fprintf(stderr, "worker event-types %s: refused by the database: %s\n", cmd, pgErr.ConstraintName)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "worker event-types %s: %v\n", cmd, err)
	}
	return exitFailure
}

// typeName parses flags around the one positional NAME.
func typeName(fs *flag.FlagSet, args []string, stderr io.Writer) (string, int, bool) {
	return onePositional(fs, args, stderr, "event type NAME")
}

// typeFlags are the flags of a type's fields.
type typeFlags struct {
	description, schemaFile, exampleFile *string
	deprecated                           *bool
	noSchema, noExample                  *bool // update only
}

func newTypeFlags(fs *flag.FlagSet, update bool) typeFlags {
	f := typeFlags{
		description: fs.String("description", "", "what the event means, for consumers"),
		schemaFile:  fs.String("schema-file", "", "a file holding the JSON Schema of the payload"),
		exampleFile: fs.String("example-file", "", "a file holding an example payload (JSON, matching the schema)"),
		deprecated:  fs.Bool("deprecated", false, "the type is deprecated (still accepted; consumers are told)"),
	}
	if update {
		f.noSchema = fs.Bool("no-schema", false, "remove the schema (any JSON)")
		f.noExample = fs.Bool("no-example", false, "remove the example")
	}
	return f
}

// apply changes t by the flags given; a file that cannot be read or is not
// JSON is a usage error naming the flag.
func (f typeFlags) apply(fs *flag.FlagSet, t *webhook.EventType) error {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "description":
			t.Description = *f.description
		case "deprecated":
			t.Deprecated = *f.deprecated
		case "no-schema":
			if *f.noSchema {
				t.Schema = nil
			}
		case "no-example":
			if *f.noExample {
				t.Example = nil
			}
		case "schema-file":
			t.Schema, err = jsonFile("schema-file", *f.schemaFile, err)
		case "example-file":
			t.Example, err = jsonFile("example-file", *f.exampleFile, err)
		}
	})
	for _, pair := range [][2]string{{"schema-file", "no-schema"}, {"example-file", "no-example"}} {
		if err == nil && flagGiven(fs, pair[0]) && flagGiven(fs, pair[1]) {
			err = fmt.Errorf("--%s and --%s: give one", pair[0], pair[1])
		}
	}
	return err
}

// jsonFile reads the JSON of the file path given to --flag (unless an
// earlier flag failed).
func jsonFile(flag, path string, before error) (json.RawMessage, error) {
	if before != nil {
		return nil, before
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("--%s: %s is not JSON", flag, path)
	}
	return json.RawMessage(b), nil
}

// The sizes webhook_event_types allows.
const (
	descriptionMax = 4096
	documentMax    = 256 << 10
)

// checkType applies the catalog's rules to a type: its name, its sizes,
// its schema compiling, its example matching it.
func checkType(t webhook.EventType) error {
	if err := eventtypes.CheckName(t.Name); err != nil {
		return err
	}
	switch {
	case len(t.Description) > descriptionMax:
		return fmt.Errorf("--description: %d bytes, at most %d", len(t.Description), descriptionMax)
	case len(t.Schema) > documentMax:
		return fmt.Errorf("--schema-file: %d bytes, at most %d (256 KiB)", len(t.Schema), documentMax)
	case len(t.Example) > documentMax:
		return fmt.Errorf("--example-file: %d bytes, at most %d (256 KiB)", len(t.Example), documentMax)
	}
	if len(t.Schema) == 0 {
		return nil
	}
	s, err := eventtypes.Compile(t.Name, t.Schema)
	if err != nil {
		return fmt.Errorf("--schema-file: the schema does not compile: %w", err)
	}
	if len(t.Example) > 0 {
		if err := s.Validate(t.Name, t.Example); err != nil {
			return fmt.Errorf("--example-file: the example does not match the schema: %w", err)
		}
	}
	return nil
}

func eventTypesAdd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := eventTypesFlags("add", stderr)
	tf := newTypeFlags(fs, false)
	name, code, ok := typeName(fs, args, stderr)
	if !ok {
		return code
	}
	t := webhook.EventType{Name: name}
	if err := tf.apply(fs, &t); err != nil {
		fmt.Fprintf(stderr, "worker event-types add: %v\n", err)
		return exitUsage
	}
	if err := checkType(t); err != nil {
		fmt.Fprintf(stderr, "worker event-types add: %v\n", err)
		return exitUsage
	}
	store, done, code := eventTypesStore(ctx, getenv, stderr, "add")
	if store == nil {
		return code
	}
	defer done()
	if _, err := store.AddEventType(ctx, t); err != nil {
		return eventTypesFail(stderr, "add", err)
	}
	fmt.Fprintf(stdout, "added event type %s%s\n", cell(t.Name), schemaNote(t))
	return exitOK
}

func eventTypesUpdate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := eventTypesFlags("update", stderr)
	tf := newTypeFlags(fs, true)
	name, code, ok := typeName(fs, args, stderr)
	if !ok {
		return code
	}
	if fs.NFlag() == 0 {
		fmt.Fprintln(stderr, "worker event-types update: give at least one of --description, --schema-file, --no-schema, --example-file, --no-example, --deprecated")
		return exitUsage
	}
	store, done, code := eventTypesStore(ctx, getenv, stderr, "update")
	if store == nil {
		return code
	}
	defer done()
	t, err := store.EventType(ctx, name)
	if err != nil {
		return eventTypesFail(stderr, "update", err)
	}
	if err := tf.apply(fs, &t); err != nil {
		fmt.Fprintf(stderr, "worker event-types update: %v\n", err)
		return exitUsage
	}
	if err := checkType(t); err != nil {
		fmt.Fprintf(stderr, "worker event-types update: %v\n", err)
		return exitUsage
	}
	if _, err := store.UpdateEventType(ctx, t); err != nil {
		return eventTypesFail(stderr, "update", err)
	}
	fmt.Fprintf(stdout, "updated event type %s%s\n", cell(t.Name), schemaNote(t))
	return exitOK
}

// schemaNote says what a type holds beside its name.
func schemaNote(t webhook.EventType) string {
	var parts []string
	if len(t.Schema) > 0 {
		parts = append(parts, "schema")
	}
	if len(t.Example) > 0 {
		parts = append(parts, "example")
	}
	if t.Deprecated {
		parts = append(parts, "deprecated")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func eventTypesList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := eventTypesFlags("list", stderr)
	asJSON := fs.Bool("json", false, "print a JSON array")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	store, done, code := eventTypesStore(ctx, getenv, stderr, "list")
	if store == nil {
		return code
	}
	defer done()
	types, err := store.EventTypes(ctx)
	if err != nil {
		return eventTypesFail(stderr, "list", err)
	}
	if *asJSON {
		return printJSON(stdout, stderr, "event-types list", types)
	}
	st, err := store.EventCatalogState(ctx)
	if err != nil {
		return eventTypesFail(stderr, "list", err)
	}
	fmt.Fprintf(stdout, "strict: %s\n\n", onOff(st.Strict))
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSCHEMA\tEXAMPLE\tDEPRECATED\tDESCRIPTION")
	for _, t := range types {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cell(t.Name), yesNo(len(t.Schema) > 0), yesNo(len(t.Example) > 0),
			yesNo(t.Deprecated), cell(firstLine(t.Description)))
	}
	_ = w.Flush()
	return exitOK
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

// firstLine is the first line of s, for a table's cell.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func eventTypesRemove(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := eventTypesFlags("remove", stderr)
	name, code, ok := typeName(fs, args, stderr)
	if !ok {
		return code
	}
	store, done, code := eventTypesStore(ctx, getenv, stderr, "remove")
	if store == nil {
		return code
	}
	defer done()
	if _, err := store.RemoveEventType(ctx, name); err != nil {
		return eventTypesFail(stderr, "remove", err)
	}
	fmt.Fprintf(stdout, "removed event type %s\n", cell(name))
	return exitOK
}

func eventTypesStrict(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := eventTypesFlags("strict", stderr)
	pos, err := parseInterleaved(fs, args)
	if err == flag.ErrHelp {
		return exitOK
	} else if err != nil {
		return exitUsage
	}
	if len(pos) > 1 || len(pos) == 1 && pos[0] != "on" && pos[0] != "off" {
		fmt.Fprintf(stderr, "worker event-types strict: give on, off, or nothing (got %q)\n", pos)
		return exitUsage
	}
	store, done, code := eventTypesStore(ctx, getenv, stderr, "strict")
	if store == nil {
		return code
	}
	defer done()
	var st outbox.EventCatalogState
	if len(pos) == 0 {
		st, err = store.EventCatalogState(ctx)
	} else {
		st, err = store.SetEventCatalogStrict(ctx, pos[0] == "on")
	}
	if err != nil {
		return eventTypesFail(stderr, "strict", err)
	}
	fmt.Fprintf(stdout, "strict: %s\n", onOff(st.Strict))
	return exitOK
}

func eventTypesExport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := eventTypesFlags("export", stderr)
	format := fs.String("format", "", "the document's format: openapi (required)")
	title := fs.String("title", "Webhooks", "the document's info.title")
	version := fs.String("version", "", "the document's info.version (default: the catalog's version)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *format != "openapi" {
		fmt.Fprintf(stderr, "worker event-types export: --format: %q: the one format is openapi\n", *format)
		return exitUsage
	}
	store, done, code := eventTypesStore(ctx, getenv, stderr, "export")
	if store == nil {
		return code
	}
	defer done()
	types, err := store.EventTypes(ctx)
	if err != nil {
		return eventTypesFail(stderr, "export", err)
	}
	st, err := store.EventCatalogState(ctx)
	if err != nil {
		return eventTypesFail(stderr, "export", err)
	}
	doc, err := eventtypes.New(types, st.Strict, st.Version).OpenAPI(eventtypes.OpenAPIInfo{Title: *title, Version: *version})
	if err != nil {
		return eventTypesFail(stderr, "export", err)
	}
	_, _ = stdout.Write(append(doc, '\n'))
	return exitOK
}
