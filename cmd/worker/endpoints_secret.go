package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fluxora/webhook-worker/endpoints"
)

// secretSource is the --secret and --secret-file flags of a command.
type secretSource struct {
	secret, file *string
}

func secretFlags(fs *flag.FlagSet, what string) secretSource {
	return secretSource{
		secret: fs.String("secret", "", what+" (default: generated and printed once)"),
		file:   fs.String("secret-file", "", what+", read from the first line of this file (/dev/stdin: a pipe)"),
	}
}

// value returns the secret given, or a generated one (generated true), or
// the exit code of a usage error. No message quotes the secret.
func (s secretSource) value(cmd string, stderr io.Writer) (secret string, generated bool, code int) {
	switch {
	case *s.secret != "" && *s.file != "":
		fmt.Fprintf(stderr, "worker endpoints %s: give --secret or --secret-file, not both\n", cmd)
		return "", false, exitUsage
	case *s.file != "":
		v, err := readSecretFile(*s.file)
		if err != nil {
			fmt.Fprintf(stderr, "worker endpoints %s: --secret-file: %v\n", cmd, err)
			return "", false, exitUsage
		}
		return v, false, exitOK
	case *s.secret != "":
		return *s.secret, false, exitOK
	}
	v, err := endpoints.GenerateSecret()
	if err != nil {
		fmt.Fprintf(stderr, "worker endpoints %s: %v\n", cmd, err)
		return "", false, exitFailure
	}
	return v, true, exitOK
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
	sf := secretFlags(fs, "the new secret")
	name, code, ok := oneName(fs, args, stderr)
	if !ok {
		return code
	}
	secret, generated, code := sf.value("rotate-secret", stderr)
	if code != exitOK {
		return code
	}
	s, done, code := sealingStore(ctx, getenv, stderr, "rotate-secret")
	if s == nil {
		return code
	}
	defer done()
	e, err := s.RotateSecret(ctx, name, secret, *grace)
	if err != nil {
		return endpointsFail(stderr, "rotate-secret", name, err)
	}
	if e.PreviousSecretUntil != nil {
		fmt.Fprintf(stdout, "rotated the secret of endpoint %s; the previous secret also signs webhook-signature until %s\n",
			e.Name, e.PreviousSecretUntil.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(stdout, "rotated the secret of endpoint %s; the previous secret signs nothing from now on\n", e.Name)
	}
	if generated {
		fmt.Fprintf(stdout, "secret (shown once): %s\n", secret)
	}
	return exitOK
}
