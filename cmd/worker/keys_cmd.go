package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/sealed"
)

// keysCommands are the commands of worker keys, in the order of the help.
var keysCommands = []command{
	{"generate", "[--id ID]", "print a new key line for WEBHOOK_SECRETS_KEY_FILE"},
	{"rotate", "[--dry-run]", "re-encrypt every stored secret under the key file's first key"},
	{"encrypt-existing", "[--dry-run]", "encrypt the secrets stored in plaintext before this version"},
}

func keysRunners() map[string]runFunc {
	return map[string]runFunc{"generate": keysGenerate, "rotate": keysRotate, "encrypt-existing": keysEncryptExisting}
}

var keysUsage = synopsis("worker keys", keysCommands) + `
WEBHOOK_SECRETS_KEY_FILE holds one key a line, ID:BASE64 of 32 random
bytes; the first line's key encrypts, every line's key decrypts. The
endpoints' secrets and client certificate keys are stored encrypted
(XChaCha20-Poly1305), each bound to its endpoint.

generate prints a new line (--id: its id; default the date and a random
suffix). To change keys: put the new line first in the file (keep the old
one below it), run rotate, which re-encrypts every stored secret under the
first key in one transaction and says how many endpoints it rewrote, then
remove the old line and restart the workers. encrypt-existing encrypts the
secrets stored in plaintext by an earlier version (idempotent: a second run
encrypts none); rotate encrypts them too. --dry-run says how many endpoints
would be rewritten, and changes nothing.
Exit codes: 0 ok, 1 failure (database), 2 usage, no key file, or a stored
secret no key of the file opens, 3 not migrated.
`

func runKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runGroup(ctx, "keys", keysRunners(), keysUsage, args, getenv, stdout, stderr)
}

func keysGenerate(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	fs := commandFlags("worker keys generate", keysUsage, stderr)
	id := fs.String("id", "", "the key's id (default: today's date and a random suffix)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *id == "" {
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		*id = time.Now().UTC().Format("20060102") + "-" + hex.EncodeToString(suffix)
	}
	line, err := sealed.GenerateKeyLine(*id)
	if err != nil {
		fmt.Fprintf(stderr, "worker keys generate: --id: %v\n", err)
		return exitUsage
	}
	fmt.Fprintln(stdout, line)
	return exitOK
}

func keysRotate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return reseal(ctx, args, getenv, stdout, stderr, "rotate", func(k *sealed.Keyring, v, ad string) (string, bool, error) {
		return k.Reseal(v, ad)
	})
}

func keysEncryptExisting(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return reseal(ctx, args, getenv, stdout, stderr, "encrypt-existing", func(k *sealed.Keyring, v, ad string) (string, bool, error) {
		if v == "" || sealed.IsSealed(v) {
			return v, false, nil
		}
		s, err := k.Seal([]byte(v), ad)
		return s, err == nil, err
	})
}

// reseal runs one of the commands that rewrite every stored credential in
// one transaction, each value through f (the new value, and whether it
// changed), and reports how many endpoints it rewrote.
func reseal(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, cmd string,
	f func(k *sealed.Keyring, v, ad string) (string, bool, error)) int {
	name := "keys " + cmd
	fs := commandFlags("worker "+name, keysUsage, stderr)
	dry := fs.Bool("dry-run", false, "count what would be rewritten, change nothing")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	k, err := secretsKeyring(getenv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
		return exitUsage
	}
	_, store, closeStore, code := opsConnectStore(ctx, getenv, stderr, name)
	if store == nil {
		return code
	}
	defer closeStore()
	n, err := store.Reseal(ctx, *dry, func(c *outbox.Credentials) (bool, error) { return resealOne(k, c, f) })
	if err != nil {
		fmt.Fprintf(stderr, "worker %s: %v (nothing was changed)\n", name, err)
		if me := (*sealed.MissingKeyError)(nil); errors.As(err, &me) {
			return exitUsage
		}
		return exitFailure
	}
	if *dry {
		fmt.Fprintf(stdout, "%s --dry-run: %d endpoints' credentials would be rewritten under key %q; nothing changed\n", cmd, n, k.Primary())
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: %d endpoints' credentials rewritten, encrypted under key %q\n", cmd, n, k.Primary())
	return exitOK
}

// resealOne passes each of c's credentials through f.
func resealOne(k *sealed.Keyring, c *outbox.Credentials, f func(k *sealed.Keyring, v, ad string) (string, bool, error)) (bool, error) {
	any := false
	for _, v := range credentialFields(c) {
		if *v.value == "" {
			continue
		}
		out, changed, err := f(k, *v.value, v.ad)
		if err != nil {
			return false, fmt.Errorf("the %s of endpoint %q: %w", v.field, c.Name, err)
		}
		*v.value, any = out, any || changed
	}
	return any, nil
}
