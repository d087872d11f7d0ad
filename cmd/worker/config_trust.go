package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"

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
}

// trust reads the trustConfig's variables.
func (e *env) trust() trustConfig {
	return trustConfig{Keys: e.secretsKeys(), EgressProxy: e.egressProxy(), RootCAs: e.rootCAs()}
}

// secretsKeys reads the key file WEBHOOK_SECRETS_KEY_FILE names; nil when
// it is unset. Errors name the file and the line, never a key.
func (e *env) secretsKeys() *sealed.Keyring {
	const name = "WEBHOOK_SECRETS_KEY_FILE"
	path := e.getenv(name)
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		e.fail(name, "%v", err)
		return nil
	}
	defer f.Close()
	k, err := sealed.ParseKeyFile(f)
	if err != nil {
		e.fail(name, "%s: %v", path, err)
		return nil
	}
	return k
}

// errNoKeyFile is the refusal of the commands that store a credential
// without a key file to seal it with.
var errNoKeyFile = errors.New("WEBHOOK_SECRETS_KEY_FILE: is required: secrets are stored encrypted under its first key (`worker keys generate` prints a key line; keep the file mode 0600)")

// secretsKeyring reads only WEBHOOK_SECRETS_KEY_FILE, required, for the
// operator commands that seal or open stored credentials.
func secretsKeyring(getenv func(string) string) (*sealed.Keyring, error) {
	e := &env{getenv: getenv}
	k := e.secretsKeys()
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
