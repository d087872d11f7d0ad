package main

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/signingkey"
)

// secretSource is the --secret, --secret-file and --signature flags of a
// command.
type secretSource struct {
	secret, file, signature *string
}

func secretFlags(fs *flag.FlagSet, what, signatureDefault string) secretSource {
	return secretSource{
		secret: fs.String("secret", "", what+" (default: generated and printed once)"),
		file:   fs.String("secret-file", "", what+", read from the first line of this file (/dev/stdin: a pipe)"),
		signature: fs.String("signature", "", "hmac (a shared secret, whsec_) or ed25519 (a key pair, whsk_: the consumer holds the public key);"+
			" default: "+signatureDefault+", or the kind of a --secret given"),
	}
}

// given returns the secret given (--secret, --secret-file; "" for none)
// and the scheme asked (--signature; "" for none), or the exit code of a
// usage error: a given secret must be of the scheme asked. No message
// quotes the secret.
func (s secretSource) given(cmd string, stderr io.Writer) (secret string, scheme signingkey.Scheme, code int) {
	if *s.signature != "" {
		var err error
		if scheme, err = signingkey.ParseScheme(*s.signature); err != nil {
			fmt.Fprintf(stderr, "worker endpoints %s: --signature: %v\n", cmd, err)
			return "", "", exitUsage
		}
	}
	flagName := "--secret"
	switch {
	case *s.secret != "" && *s.file != "":
		fmt.Fprintf(stderr, "worker endpoints %s: give --secret or --secret-file, not both\n", cmd)
		return "", "", exitUsage
	case *s.file != "":
		v, err := readSecretFile(*s.file)
		if err != nil {
			fmt.Fprintf(stderr, "worker endpoints %s: --secret-file: %v\n", cmd, err)
			return "", "", exitUsage
		}
		secret, flagName = v, "--secret-file"
	default:
		secret = *s.secret
	}
	if secret == "" {
		return "", scheme, exitOK
	}
	if err := signingkey.Check(secret); err != nil {
		fmt.Fprintf(stderr, "worker endpoints %s: %s: %v\n", cmd, flagName, err)
		return "", "", exitUsage
	}
	if kind := signingkey.SchemeOf([]byte(secret)); scheme != "" && kind != scheme {
		fmt.Fprintf(stderr, "worker endpoints %s: --signature %s, but %s is an %s secret: for ed25519 give a key pair's private key (whsk_),"+
			" for hmac any other secret, or leave %s out to have one made\n", cmd, scheme, flagName, kind, flagName)
		return "", "", exitUsage
	}
	return secret, signingkey.SchemeOf([]byte(secret)), exitOK
}

// generate makes a new secret of scheme (hmac when ""), or says why not.
func generate(cmd string, scheme signingkey.Scheme, stderr io.Writer) (string, int) {
	v, err := signingkey.Generate(cmp.Or(scheme, signingkey.HMAC))
	if err != nil {
		fmt.Fprintf(stderr, "worker endpoints %s: %v\n", cmd, err)
		return "", exitFailure
	}
	return v, exitOK
}

// Lines that hand over what a new secret gives its consumer.
const (
	secretLine    = "secret (shown once): "
	publicKeyLine = "public key for the consumer (ed25519): "
)

// printIssued prints what a new secret gives its consumer: an HMAC secret
// made here (generated), once; an ed25519 key's public key, never the
// private key.
func printIssued(stdout io.Writer, iss endpoints.Issued) {
	switch {
	case iss.PublicKey != "":
		fmt.Fprintf(stdout, "%s%s\n", publicKeyLine, iss.PublicKey)
	case iss.Secret != "":
		fmt.Fprintf(stdout, "%s%s\n", secretLine, iss.Secret)
	}
}

// issuedFor is what printIssued shows of secret: its public key, or the
// secret itself when generated here (one given is the operator's already).
func issuedFor(secret string, generated bool) endpoints.Issued {
	iss := endpoints.Issued{Signing: endpoints.SigningOf(secret)}
	if generated && iss.PublicKey == "" {
		iss.Secret = secret
	}
	return iss
}

// readSecretFile reads the first line of path, without its line ending.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err // names the path and why, never the content
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 64<<10)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("%s holds no secret on its first line", path)
	}
	return line, nil
}

func endpointsRotateSecret(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := endpointsFlags("rotate-secret", stderr)
	grace := spanFlag(fs, "grace", endpoints.GraceDefault, span{max: endpoints.GraceMax}, "how long the replaced secret keeps signing (0: not at all)")
	sf := secretFlags(fs, "the new secret", "the current secret's")
	name, code, ok := oneName(fs, args, stderr)
	if !ok {
		return code
	}
	secret, scheme, code := sf.given("rotate-secret", stderr)
	if code != exitOK {
		return code
	}
	s, done, code := sealingStore(ctx, getenv, stderr, "rotate-secret")
	if s == nil {
		return code
	}
	defer done()
	// Without a secret given, the store makes one, of the current one's
	// kind unless --signature says otherwise (it alone reads the current
	// one).
	var e endpoints.Endpoint
	var iss endpoints.Issued
	var err error
	if secret != "" {
		e, err = s.RotateSecret(ctx, name, secret, *grace)
		iss = issuedFor(secret, false)
	} else {
		e, iss, err = s.RotateKey(ctx, name, scheme, *grace)
	}
	if err != nil {
		return endpointsFail(stderr, "rotate-secret", name, err)
	}
	if e.PreviousSecretUntil != nil {
		fmt.Fprintf(stdout, "rotated the secret of endpoint %s; the previous secret also signs webhook-signature until %s\n",
			e.Name, e.PreviousSecretUntil.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(stdout, "rotated the secret of endpoint %s; the previous secret signs nothing from now on\n", e.Name)
	}
	printIssued(stdout, iss)
	return exitOK
}
