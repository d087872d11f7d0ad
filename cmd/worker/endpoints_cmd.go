package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/signingkey"
	"github.com/fluxora/webhook-worker/webhook"
)

// endpointsCommands are the commands of worker endpoints, in the order of
// the help; endpointsRunners dispatches them.
var endpointsCommands = []command{
	{"add", "--name N --url U [--events a,b] [--signature hmac|ed25519] [--secret S | --secret-file F] [--retry-rps N]" +
		" [--client-cert-file F --client-key-file F] [--ordering move-on|hold] [--rate N/s|N/m [--burst B]] [--max-in-flight M]" +
		" [--filter JSONPATH]",
		"add an endpoint"},
	{"list", "[--json]", "every endpoint, never its secret (an ed25519 one's public key)"},
	{"update", "NAME [--url U] [--events a,b] [--retry-rps N] [--client-cert-file F --client-key-file F | --no-client-cert]" +
		" [--ordering move-on|hold] [--signature hmac|ed25519] [--rate N/s|N/m | --no-rate] [--burst B] [--max-in-flight M | --no-max-in-flight]" +
		" [--filter JSONPATH | --no-filter]",
		"change an endpoint's URL, events, retry rate, client certificate, ordering, secret, flow control or payload filter"},
	{"disable", "NAME [--reason R]", "stop delivering to an endpoint; its pending deliveries are dead-lettered"},
	{"enable", "NAME", "deliver to a disabled endpoint again"},
	{"remove", "NAME [--force]", "remove an endpoint"},
	{"rotate-secret", "NAME [--grace 24h] [--signature hmac|ed25519] [--secret S | --secret-file F]",
		"sign with a new secret, the old one beside it for a grace period"},
}

func endpointsRunners() map[string]runFunc {
	return map[string]runFunc{
		"add": endpointsAdd, "list": endpointsList, "update": endpointsUpdate,
		"disable": endpointsDisable, "enable": endpointsEnable, "remove": endpointsRemove,
		"rotate-secret": endpointsRotateSecret,
	}
}

// orderingUsage is the help of --ordering.
const orderingUsage = "a dead-lettered delivery with an ordering key: move-on (the key's next event goes; the default) " +
	"or hold (the key waits until it is replayed or purged)"

// retryRPSMax is the largest --retry-rps and WEBHOOK_RETRY_RPS: the
// endpoint catalog's bound, declared once.
const retryRPSMax = endpoints.RetryRPSMax

var endpointsUsage = synopsis("worker endpoints", endpointsCommands) + `
An endpoint receives the events of the types it subscribes to (--events;
omitted or "*": every type; an empty list is refused), signed with its own secret.
A type ending in "*" is a pattern: "invoice.*" takes every type that starts
with "invoice.". Types starting with "fluxora." are the worker's own: only
an endpoint that names them (as "fluxora.*" does) receives them. Without
--secret, add generates one (whsec_ + base64 of 32 random bytes) and prints
it once: store it then, no command shows it again. --secret-file reads it
from a file instead (its first line; /dev/stdin for a pipe), so that it
never stands in the process list. URLs: https, or http only
to a loopback host; no credentials. --retry-rps (1 to 1000000) overrides
WEBHOOK_RETRY_RPS (update --retry-rps 0 clears it). --json prints a JSON
array ([] when empty). Changes reach running workers within a
second.

--signature ed25519 signs with a key pair instead of a shared secret
(Standard Webhooks v1a): add makes one (or takes a whsk_ key as --secret)
and prints its public key (whpk_...) for the consumer, who can verify
but not sign; the private key is never shown. Its requests carry the
webhook-* signature headers whatever WEBHOOK_SIGNATURE_HEADERS says, and
no x-fluxora-signature. list shows the public key (with the key file).
update --signature replaces the secret at once with a new one of that
kind (no grace: rotate-secret --signature keeps the old one signing).

Secrets and client certificate keys are stored encrypted under the first
key of WEBHOOK_SECRETS_KEY_FILE: add, rotate-secret and a secret's or a
client certificate's update need it (exit 2 without it).
--client-cert-file (PEM chain, leaf first) and --client-key-file (its PEM
key) give the endpoint a client certificate for mutual TLS;
--no-client-cert removes it. Workers use a new certificate for their new
connections within 10 seconds.

rotate-secret makes a new secret (generated without --secret, of the
current one's kind unless --signature says otherwise) sign from now on,
and keeps the one it replaces signing beside it
in webhook-signature for --grace (default 24h, at most 30 days; 0: none),
counted by the database clock, so that restarting workers neither extends
nor shortens it. x-fluxora-signature uses the new secret alone. Rotating
again during a grace period ends that one. For a secret that leaked,
--grace 0: the old one stops signing at once.

disable moves the endpoint's pending deliveries to the dead-letter table;
enable, then worker dlq replay --endpoint NAME, sends them again. remove
refuses while deliveries are pending; --force dead-letters them first.
The name "default" is the WEBHOOK_URL endpoint of the environment.
Exit codes: 0 ok, 1 failure (database, unknown endpoint, name taken,
pending deliveries), 2 usage or a bad value, 3 not migrated.
`

func runEndpoints(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runGroup(ctx, "endpoints", endpointsRunners(), endpointsUsage, args, getenv, stdout, stderr)
}

func endpointsFlags(name string, stderr io.Writer) *flag.FlagSet {
	return commandFlags("worker endpoints "+name, endpointsUsage, stderr)
}

// endpointsStore connects and returns the store, or nil and the exit code.
func endpointsStore(ctx context.Context, getenv func(string) string, stderr io.Writer, name string) (*endpoints.Store, func(), int) {
	return newEndpointsStore(ctx, getenv, stderr, name, nil)
}

// sealingStore is endpointsStore with the key file's Sealer, for the
// commands that store a secret or a client key: without
// WEBHOOK_SECRETS_KEY_FILE they exit 2, before connecting.
func sealingStore(ctx context.Context, getenv func(string) string, stderr io.Writer, name string) (*endpoints.Store, func(), int) {
	k, err := secretsKeyring(getenv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "worker endpoints %s: %v\n", name, err)
		return nil, nil, exitUsage
	}
	return newEndpointsStore(ctx, getenv, stderr, name, keyringSealer{k})
}

func newEndpointsStore(ctx context.Context, getenv func(string) string, stderr io.Writer, name string, sealer endpoints.Sealer) (*endpoints.Store, func(), int) {
	cfg, pool, code := opsConnect(ctx, getenv, stderr, "endpoints "+name)
	if pool == nil {
		return nil, nil, code
	}
	s, err := endpoints.New(endpoints.Config{Pool: pool, Sealer: sealer, ConsoleURL: cfg.ConsoleURL})
	if err != nil {
		pool.Close()
		fmt.Fprintf(stderr, "worker endpoints %s: %v\n", name, err)
		return nil, nil, exitFailure
	}
	return s, pool.Close, exitOK
}

// endpointsFail prints err and returns its exit code: a bad value names its
// flag and exits 2; anything else (unknown endpoint, name taken, pending
// deliveries, the database) exits 1.
func endpointsFail(stderr io.Writer, cmd, name string, err error) int {
	var fe *endpoints.FieldError
	switch {
	case errors.As(err, &fe):
		fmt.Fprintf(stderr, "worker endpoints %s: --%s: %s\n", cmd, fe.Field, fe.Problem)
		return exitUsage
	case errors.Is(err, endpoints.ErrNotFound) && strings.EqualFold(name, endpoints.DefaultName):
		fmt.Fprintf(stderr, "worker endpoints %s: %v: %q is the WEBHOOK_URL endpoint of the environment (WEBHOOK_URL, WEBHOOK_SECRET), not one of the table\n",
			cmd, err, endpoints.DefaultName)
	default:
		fmt.Fprintf(stderr, "worker endpoints %s: %v\n", cmd, err)
	}
	return exitFailure
}

// parseEvents reads a given --events: "a,b" (spaces around types ignored),
// or "*" for every type. A type ending in "*" is a pattern ("invoice.*");
// a "*" anywhere else is refused. A value that lists no type ("", or only commas
// and blanks) is refused: it reads as "no events" but stored as an empty
// list it would subscribe to every type. Omitting --events, or "*", is how
// every type is asked for.
func parseEvents(v string) ([]string, error) {
	if strings.TrimSpace(v) == "*" {
		return []string{}, nil
	}
	if strings.TrimFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) == "" {
		return nil, fmt.Errorf(`--events: %q lists no event type (omit --events, or give "*", for every type)`, v)
	}
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		switch t {
		case "":
			return nil, fmt.Errorf("--events: an empty event type in %q", v)
		case "*":
			return nil, errors.New(`--events: "*" (every type) cannot be combined with other types`)
		}
		if strings.Contains(strings.TrimSuffix(t, "*"), "*") {
			return nil, fmt.Errorf(`--events: %q: "*" may only end a type, as a pattern ("invoice.*")`, t)
		}
		out = append(out, t)
	}
	return out, nil
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// oneName parses flags around the one positional NAME.
func oneName(fs *flag.FlagSet, args []string, stderr io.Writer) (string, int, bool) {
	return onePositional(fs, args, stderr, "endpoint NAME")
}

// onePositional parses flags around the one positional argument, what
// the usage calls it.
func onePositional(fs *flag.FlagSet, args []string, stderr io.Writer, what string) (string, int, bool) {
	pos, err := parseInterleaved(fs, args)
	if err == flag.ErrHelp {
		return "", exitOK, false
	} else if err != nil {
		return "", exitUsage, false
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "%s: give exactly one %s (got %d arguments)\n\n", fs.Name(), what, len(pos))
		fs.Usage()
		return "", exitUsage, false
	}
	return pos[0], exitOK, true
}

func endpointsAdd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := endpointsFlags("add", stderr)
	name := fs.String("name", "", "endpoint name (required)")
	u := fs.String("url", "", "endpoint URL (required)")
	events := fs.String("events", "", `subscribed event types, comma-separated, "invoice.*" a pattern ("*" or omitted: every type)`)
	sf := secretFlags(fs, "signing secret", "hmac")
	rps := rangeFlag(fs, "retry-rps", 0, 0, retryRPSMax, "retry attempts per second (0, the default: WEBHOOK_RETRY_RPS)")
	cf := certFlags(fs)
	ordering := fs.String("ordering", webhook.OrderingMoveOn, orderingUsage)
	ff := newFlowFlags(fs, false)
	pf := newFilterFlags(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	flow, code := ff.forAdd(fs, stderr)
	if code != exitOK {
		return code
	}
	filter, code := pf.value(fs, "add", stderr)
	if code != exitOK {
		return code
	}
	for _, f := range [][2]string{{"name", *name}, {"url", *u}} {
		if f[1] == "" {
			fmt.Fprintf(stderr, "worker endpoints add: --%s is required\n", f[0])
			return exitUsage
		}
	}
	types := []string{} // every type
	if flagGiven(fs, "events") {
		var err error
		if types, err = parseEvents(*events); err != nil {
			fmt.Fprintf(stderr, "worker endpoints add: %v\n", err)
			return exitUsage
		}
	}
	secret, scheme, code := sf.given("add", stderr)
	if code != exitOK {
		return code
	}
	generated := secret == ""
	if generated {
		if secret, code = generate("add", scheme, stderr); code != exitOK {
			return code
		}
	}
	if code := checkEgress(*u, getenv, stderr, "add"); code != exitOK {
		return code
	}
	cert, code := cf.value("add", stderr)
	if code != exitOK {
		return code
	}
	s, done, code := sealingStore(ctx, getenv, stderr, "add")
	if s == nil {
		return code
	}
	defer done()
	e, err := s.Create(ctx, endpoints.NewEndpoint{Name: *name, URL: *u, Events: types, Secret: secret, RetryRPS: *rps, ClientCert: cert,
		Ordering: *ordering, Flow: flow, Filter: deref(filter)})
	if err != nil {
		return endpointsFail(stderr, "add", *name, err)
	}
	fmt.Fprintf(stdout, "added endpoint %s (id %s, events %s%s%s)\n", e.Name, e.ID, cell(eventsText(e.EventTypes)), filterNote(filter), certText(e))
	printIssued(stdout, issuedFor(secret, generated))
	return exitOK
}

// checkEgress refuses (exit 2) an endpoint URL whose host is an IP
// address, in any spelling, that the egress guard of this environment
// (WEBHOOK_EGRESS_ALLOW, WEBHOOK_EGRESS_ALLOW_LOOPBACK) refuses: the
// workers would dead-letter every delivery. The URL's other rules are the
// database's.
func checkEgress(raw string, getenv func(string) string, stderr io.Writer, cmd string) int {
	allow, loopback, err := egressConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "worker endpoints %s: %v\n", cmd, err)
		return exitUsage
	}
	if err := egressRefusesURL(raw, allow, loopback); err != nil {
		fmt.Fprintf(stderr, "worker endpoints %s: --url: %v\n", cmd, err)
		return exitUsage
	}
	return exitOK
}

// displayURL is what list shows of an endpoint URL: scheme, host and path,
// never a query string (it may hold a token).
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

func eventsText(types []string) string {
	if len(types) == 0 {
		return "*"
	}
	return strings.Join(types, ",")
}

func endpointsList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := endpointsFlags("list", stderr)
	asJSON := fs.Bool("json", false, "print a JSON array")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	s, done, code := newEndpointsStore(ctx, getenv, stderr, "list", listSealer(getenv, stderr))
	if s == nil {
		return code
	}
	defer done()
	list, err := s.List(ctx)
	if err != nil {
		return endpointsFail(stderr, "list", "", err)
	}
	signing, err := s.Signing(ctx)
	if err != nil && !errors.Is(err, endpoints.ErrNoSealer) {
		return endpointsFail(stderr, "list", "", err)
	}
	flows, err := s.Flows(ctx)
	if err != nil {
		return endpointsFail(stderr, "list", "", err)
	}
	filters, err := s.Filters(ctx)
	if err != nil {
		return endpointsFail(stderr, "list", "", err)
	}
	shown := make([]listed, len(list))
	for i, e := range list {
		e.URL = displayURL(e.URL)
		shown[i].Endpoint = e
		if sg, ok := signing[e.ID]; ok {
			shown[i].Signing = &sg
		}
		shown[i].flowShown = showFlow(flows[e.Name])
		shown[i].Filter = filters[e.Name]
	}
	if *asJSON {
		return printJSON(stdout, stderr, "endpoints list", shown)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tURL\tEVENTS\tFILTER\tENABLED\tRETRY RPS\tRATE\tIN FLIGHT\tPAUSED UNTIL\tORDERING\tSIGNATURE\tPUBLIC KEY\tPREVIOUS SECRET UNTIL"+
		"\tDISABLED REASON / LAST ERROR")
	for _, l := range shown {
		e := l.Endpoint
		enabled, rps, prev, note := "yes", "-", "-", "-"
		if e.RetryRPS > 0 {
			rps = fmt.Sprint(e.RetryRPS)
		}
		if e.PreviousSecretUntil != nil {
			prev = e.PreviousSecretUntil.UTC().Format(time.RFC3339)
		}
		switch {
		case !e.Enabled:
			enabled, note = "no", e.DisabledReason
		case e.FailingSince != nil:
			note = "failing since " + e.FailingSince.UTC().Format(time.RFC3339) + ": " + e.LastError
		}
		scheme, pub := "?", "?" // the secret is sealed: without the key file, unknown
		if l.Signing != nil {
			scheme, pub = string(l.Scheme), cmp.Or(l.PublicKey, "-")
		}
		rate, inFlight := endpoints.FormatFlow(l.flow)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(e.Name), cell(e.URL), cell(eventsText(e.EventTypes)),
			filterText(l.Filter), enabled, rps, rate, inFlight, cmp.Or(l.PausedUntil, "-"), cell(e.Ordering), scheme, pub, prev, cell(note))
	}
	_ = w.Flush()
	return exitOK
}

// listed is an endpoint as list shows it: with how it signs when its
// secret was opened (the JSON's "signature" and "public_key").
type listed struct {
	endpoints.Endpoint
	*endpoints.Signing
	flowShown
	// Filter is its payload filter as stored (JSON "filter"); "": none.
	Filter string `json:"filter,omitempty"`
}

// listSealer is the key file's Sealer, through which list reads how each
// endpoint signs (the scheme is in the sealed secret); nil without
// WEBHOOK_SECRETS_KEY_FILE, or with one that does not read (said on
// stderr): list shows the rest all the same.
func listSealer(getenv func(string) string, stderr io.Writer) endpoints.Sealer {
	k, err := secretsKeyring(getenv, stderr)
	switch {
	case errors.Is(err, errNoKeyFile):
		return nil
	case err != nil:
		fmt.Fprintf(stderr, "worker endpoints list: signatures not shown: %v\n", err)
		return nil
	}
	return keyringSealer{k}
}

func endpointsUpdate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := endpointsFlags("update", stderr)
	u := fs.String("url", "", "new URL")
	events := fs.String("events", "", `subscribed event types, comma-separated, "invoice.*" a pattern ("*": every type)`)
	rps := rangeFlag(fs, "retry-rps", 0, 0, retryRPSMax, "retry attempts per second (0: WEBHOOK_RETRY_RPS)")
	cf := certFlags(fs)
	ordering := fs.String("ordering", "", orderingUsage)
	signature := fs.String("signature", "", "replace the secret at once (no grace) with a new one: hmac (whsec_) or ed25519 (a key pair)")
	ff := newFlowFlags(fs, true)
	pf := newFilterFlags(fs, true)
	name, code, ok := oneName(fs, args, stderr)
	if !ok {
		return code
	}
	var up endpoints.Update
	if code := ff.forUpdate(fs, &up, stderr); code != exitOK {
		return code
	}
	if up.Filter, code = pf.value(fs, "update", stderr); code != exitOK {
		return code
	}
	if up.ClientCert, code = cf.value("update", stderr); code != exitOK {
		return code
	}
	if flagGiven(fs, "signature") {
		var secret string
		if secret, code = updatedSecret(*signature, stderr); code != exitOK {
			return code
		}
		up.Secret = &secret
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "url":
			up.URL = u
		case "retry-rps":
			up.RetryRPS = rps
		case "ordering":
			up.Ordering = ordering
		case "events":
			var types []string
			if types, err = parseEvents(*events); err == nil {
				up.Events = &types
			}
		}
	})
	if err != nil {
		fmt.Fprintf(stderr, "worker endpoints update: %v\n", err)
		return exitUsage
	}
	if up == (endpoints.Update{}) {
		fmt.Fprintln(stderr, "worker endpoints update: give at least one of --url, --events, --retry-rps, --client-cert-file, --no-client-cert,"+
			" --ordering, --signature, --rate, --burst, --no-rate, --max-in-flight, --no-max-in-flight, --filter, --no-filter")
		return exitUsage
	}
	if up.URL != nil {
		if code := checkEgress(*up.URL, getenv, stderr, "update"); code != exitOK {
			return code
		}
	}
	open := endpointsStore
	if up.ClientCert != nil || up.Secret != nil {
		open = sealingStore
	}
	s, done, code := open(ctx, getenv, stderr, "update")
	if s == nil {
		return code
	}
	defer done()
	e, err := s.Update(ctx, name, up)
	if err != nil {
		return endpointsFail(stderr, "update", name, err)
	}
	rpsText := "WEBHOOK_RETRY_RPS"
	if e.RetryRPS > 0 {
		rpsText = fmt.Sprint(e.RetryRPS)
	}
	fmt.Fprintf(stdout, "updated endpoint %s: url %s, events %s, retry rps %s, ordering %s%s%s\n", e.Name, cell(displayURL(e.URL)),
		cell(eventsText(e.EventTypes)), rpsText, e.Ordering, filterNote(up.Filter), certText(e))
	if up.Secret != nil {
		fmt.Fprintf(stdout, "it signs with a new %s secret from now on; the one it replaced signs nothing\n", signingkey.SchemeOf([]byte(*up.Secret)))
		printIssued(stdout, issuedFor(*up.Secret, true))
	}
	return exitOK
}

// updatedSecret makes the new secret of update --signature.
func updatedSecret(signature string, stderr io.Writer) (string, int) {
	scheme, err := signingkey.ParseScheme(signature)
	if err != nil {
		fmt.Fprintf(stderr, "worker endpoints update: --signature: %v\n", err)
		return "", exitUsage
	}
	return generate("update", scheme, stderr)
}

func endpointsDisable(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := endpointsFlags("disable", stderr)
	reason := fs.String("reason", "disabled by operator", "why (kept on the endpoint and in its dead letters)")
	name, code, ok := oneName(fs, args, stderr)
	if !ok {
		return code
	}
	s, done, code := endpointsStore(ctx, getenv, stderr, "disable")
	if s == nil {
		return code
	}
	defer done()
	moved, err := s.DisableByName(ctx, name, *reason)
	if err != nil {
		return endpointsFail(stderr, "disable", name, err)
	}
	fmt.Fprintf(stdout, "disabled endpoint %s; %d pending deliveries dead-lettered\n", name, moved)
	if moved > 0 {
		fmt.Fprintf(stdout, "to recover them: worker endpoints enable %s && worker dlq replay --endpoint %s\n", name, name)
	}
	return exitOK
}

func endpointsEnable(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := endpointsFlags("enable", stderr)
	name, code, ok := oneName(fs, args, stderr)
	if !ok {
		return code
	}
	s, done, code := endpointsStore(ctx, getenv, stderr, "enable")
	if s == nil {
		return code
	}
	defer done()
	if _, err := s.Enable(ctx, name); err != nil {
		return endpointsFail(stderr, "enable", name, err)
	}
	fmt.Fprintf(stdout, "enabled endpoint %s; its dead letters, if any, are sent again by: worker dlq replay --endpoint %s\n", name, name)
	return exitOK
}

func endpointsRemove(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := endpointsFlags("remove", stderr)
	force := fs.Bool("force", false, "dead-letter its pending deliveries and remove it")
	name, code, ok := oneName(fs, args, stderr)
	if !ok {
		return code
	}
	s, done, code := endpointsStore(ctx, getenv, stderr, "remove")
	if s == nil {
		return code
	}
	defer done()
	moved, err := s.Remove(ctx, name, *force)
	if err != nil {
		return endpointsFail(stderr, "remove", name, err)
	}
	fmt.Fprintf(stdout, "removed endpoint %s; %d pending deliveries dead-lettered\n", name, moved)
	return exitOK
}
