package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/fluxora/webhook-worker/console"
	"github.com/fluxora/webhook-worker/sealed"
)

// trustConfig is the configuration of what the worker trusts and is
// trusted with: the key file that seals the stored credentials, the
// egress proxy, the roots that verify consumers.
type trustConfig struct {
	// Keys are WEBHOOK_SECRETS_KEY_FILE's (the first seals, all open); nil
	// when it is unset: only plaintext secrets of before can be read, and
	// a worker that finds a sealed one refuses to start.
	Keys *sealed.Keyring
	// EgressProxy (WEBHOOK_EGRESS_PROXY) carries every delivery, by
	// CONNECT; nil: none (HTTPS_PROXY and the like are never read).
	EgressProxy *url.URL
	// RootCAs verify the consumers' certificates: the system roots and
	// WEBHOOK_CA_FILE's, or WEBHOOK_CA_FILE's alone with
	// WEBHOOK_CA_ONLY=true; nil: the system roots.
	RootCAs *x509.CertPool
	// Warnings are what the start-up log warns of: the key file readable
	// by its group or others.
	Warnings []string
}

// trust reads the trustConfig's variables.
func (e *env) trust() trustConfig {
	t := trustConfig{EgressProxy: e.egressProxy(), RootCAs: e.rootCAs()}
	t.Keys = e.secretsKeys(func(w string) { t.Warnings = append(t.Warnings, w) })
	return t
}

// secretsKeys reads the key file WEBHOOK_SECRETS_KEY_FILE names (through
// readOwnerFile: refused when others can write it or when it is over
// sealed.MaxKeyFileBytes; warn is called when others can read it); nil
// when it is unset. Errors name the file and the line, never a key.
func (e *env) secretsKeys(warn func(string)) *sealed.Keyring {
	const name = "WEBHOOK_SECRETS_KEY_FILE"
	path := e.getenv(name)
	if path == "" {
		return nil
	}
	text, err := readOwnerFile(name, path, sealed.MaxKeyFileBytes, warn)
	if err != nil {
		e.errs = append(e.errs, err)
		return nil
	}
	k, err := sealed.ParseKeyFile(bytes.NewReader(text))
	if err != nil {
		e.fail(name, "%s: %v", path, err)
		return nil
	}
	return k
}

// readOwnerFile reads the file at path, which the variable name names and
// which holds keys or a token, refusing it when its group or others can
// write it (whoever can write it chooses the keys that seal the stored
// credentials, or the console's token) or when it is over limit bytes
// (refused, never cut). When its group or others can read it, warn is
// called once with a text that names the variable and the file. The mode
// judged is the opened file's (fstat): a name swapped between a check and
// the read cannot pass one file's mode off as another's. Errors name the
// variable and the file, never the content.
func readOwnerFile(name, path string, limit int64, warn func(string)) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err) // names the path and why
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if mode := fi.Mode().Perm(); mode&0o022 != 0 {
		return nil, fmt.Errorf("%s: %s can be written by its group or others (mode %04o): refused; make it the owner's alone: chmod 0600 %s (or 0400)",
			name, path, mode, path)
	} else if mode&0o044 != 0 {
		warn(fmt.Sprintf("%s: %s can be read by its group or others (mode %04o): chmod 0600 %s (or 0400) unless they need it",
			name, path, mode, path))
	}
	text, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", name, path, err)
	}
	if int64(len(text)) > limit {
		return nil, fmt.Errorf("%s: %s is over %d KiB: refused, not cut", name, path, limit>>10)
	}
	return text, nil
}

// errNoKeyFile is the refusal of the commands that store a credential
// without a key file to seal it with.
var errNoKeyFile = errors.New("WEBHOOK_SECRETS_KEY_FILE: is required: secrets are stored encrypted under its first key (`worker keys generate` prints a key line; keep the file mode 0600)")

// secretsKeyring reads only WEBHOOK_SECRETS_KEY_FILE, required, for the
// operator commands that seal or open stored credentials; its warning, if
// any, goes to stderr.
func secretsKeyring(getenv func(string) string, stderr io.Writer) (*sealed.Keyring, error) {
	e := &env{getenv: getenv}
	k := e.secretsKeys(func(w string) { fmt.Fprintf(stderr, "worker: warning: %s\n", w) })
	if err := errors.Join(e.errs...); err != nil {
		return nil, err
	}
	if k == nil {
		return nil, errNoKeyFile
	}
	return k, nil
}

// egressProxy reads WEBHOOK_EGRESS_PROXY: an http:// or https:// URL with
// a host (credentials allowed: they go in Proxy-Authorization); never
// printed, as it may hold a password.
func (e *env) egressProxy() *url.URL {
	const name = "WEBHOOK_EGRESS_PROXY"
	v := e.getenv(name)
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		e.fail(name, "must be the proxy's http:// or https:// URL, host and port (e.g. http://proxy.internal:3128)")
		return nil
	}
	return u
}

// rootCAs reads WEBHOOK_CA_FILE (PEM certificates) and WEBHOOK_CA_ONLY.
func (e *env) rootCAs() *x509.CertPool {
	path, only := e.getenv("WEBHOOK_CA_FILE"), e.bool("WEBHOOK_CA_ONLY", false)
	if path == "" {
		if only {
			e.fail("WEBHOOK_CA_ONLY", "needs WEBHOOK_CA_FILE: with no roots at all, no consumer could be verified")
		}
		return nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		e.fail("WEBHOOK_CA_FILE", "%v", err)
		return nil
	}
	pool := x509.NewCertPool()
	if !only {
		if pool, err = x509.SystemCertPool(); err != nil {
			e.fail("WEBHOOK_CA_FILE", "the system roots cannot be read (%v): set WEBHOOK_CA_ONLY=true to use this file alone", err)
			return nil
		}
	}
	if !pool.AppendCertsFromPEM(pem) {
		e.fail("WEBHOOK_CA_FILE", "%s holds no PEM certificate", path)
		return nil
	}
	return pool
}

// String says what the trust configuration is, for the start-up log:
// never a key, a proxy's URL or credentials.
func (t trustConfig) String() string {
	return fmt.Sprintf("secrets key %s, egress proxy %t, extra roots %t", keyText(t.Keys), t.EgressProxy != nil, t.RootCAs != nil)
}

func keyText(k *sealed.Keyring) string {
	if k == nil {
		return "none"
	}
	return fmt.Sprintf("%q (%d keys)", k.Primary(), len(k.IDs()))
}

// Rules of the console's token beyond console.TokenMinLength characters:
// a token of few distinct characters ("aaaa...", "abab...") is guessed
// long before its length says.
const tokenMinDistinct = 12

// tokenFileLimit bounds the token file (its first line is the token).
const tokenFileLimit = 64 << 10

// readTokenFile reads the console's token, the first line of the file
// WEBHOOK_CONSOLE_TOKEN_FILE names (path), through readOwnerFile. The line
// is trimmed of the spaces, tabs and CR around it (an editor's trailing
// blank would otherwise be a token nobody can type); a token of fewer than
// console.TokenMinLength characters or fewer than tokenMinDistinct
// distinct ones is refused. Errors name the variable and the file, never
// the token.
func readTokenFile(path string, warn func(string)) (string, error) {
	const name = "WEBHOOK_CONSOLE_TOKEN_FILE"
	text, err := readOwnerFile(name, path, tokenFileLimit, warn)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(text), "\n")
	token := strings.Trim(line, " \t\r")
	switch {
	case token == "":
		return "", fmt.Errorf("%s: %s holds no token on its first line", name, path)
	case utf8.RuneCountInString(token) < console.TokenMinLength:
		return "", fmt.Errorf("%s: the token in %s is shorter than %d characters", name, path, console.TokenMinLength)
	case distinctRunes(token) < tokenMinDistinct:
		return "", fmt.Errorf("%s: the token in %s has fewer than %d distinct characters", name, path, tokenMinDistinct)
	}
	return token, nil
}

// distinctRunes counts the distinct characters of s.
func distinctRunes(s string) int {
	seen := map[rune]bool{}
	for _, r := range s {
		seen[r] = true
	}
	return len(seen)
}
