package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/sealed"
)

var _ endpoints.Sealer = keyringSealer{}

// keyringSealer is the key file's Keyring as the endpoints' Sealer: each
// value bound to its endpoint's id and its field.
type keyringSealer struct{ k *sealed.Keyring }

func (s keyringSealer) SealSecret(id, secret string) (string, error) {
	return s.k.Seal([]byte(secret), sealed.EndpointSecret(id))
}

func (s keyringSealer) OpenSecret(id, stored string) (string, error) {
	b, err := s.k.Open(stored, sealed.EndpointSecret(id))
	return string(b), err
}

func (s keyringSealer) SealClientKey(id string, key []byte) (string, error) {
	return s.k.Seal(key, sealed.EndpointClientKey(id))
}

func (s keyringSealer) OpenClientKey(id, stored string) ([]byte, error) {
	return s.k.Open(stored, sealed.EndpointClientKey(id))
}

// errSealedUnreadable is the refusal to start of a worker that finds a
// stored credential it cannot open: it would have to send unsigned, or
// without its client certificate. Exit 2.
var errSealedUnreadable = errors.New("WEBHOOK_SECRETS_KEY_FILE")

// openCredentials opens every credential of c (each bound to its endpoint
// and field): the first that does not open is the error, naming the
// endpoint, the field and the key id (never a value); plaintexts counts
// the secrets still stored in plaintext.
func openCredentials(k *sealed.Keyring, all []outbox.Credentials) (plaintexts int, err error) {
	for i := range all {
		for _, v := range credentialFields(&all[i]) {
			if *v.value != "" && !sealed.IsSealed(*v.value) {
				plaintexts++
			} else if _, err := k.Open(*v.value, v.ad); err != nil {
				return 0, unreadable(k, all[i].Name, v.field, err)
			}
		}
	}
	return plaintexts, nil
}

// credentialField is one stored credential of an endpoint: what it is,
// the value as stored ("" for none) and its associated data.
type credentialField struct {
	field string
	value *string
	ad    string
}

func credentialFields(c *outbox.Credentials) []credentialField {
	return []credentialField{
		{"secret", &c.Secret, sealed.EndpointSecret(c.ID)},
		{"previous secret", &c.Previous, sealed.EndpointSecret(c.ID)},
		{"client certificate key", &c.ClientKey, sealed.EndpointClientKey(c.ID)},
	}
}

// unreadable says why a credential does not open, and what to do.
func unreadable(k *sealed.Keyring, endpoint, field string, err error) error {
	var me *sealed.MissingKeyError
	switch {
	case k == nil && errors.As(err, &me):
		return fmt.Errorf("%w: is not set, and the %s of endpoint %q is sealed with key id %q: set it to the key file holding that key",
			errSealedUnreadable, field, endpoint, me.ID)
	case errors.As(err, &me):
		return fmt.Errorf("%w: the %s of endpoint %q is %v: add key %q to the file (keep the others)", errSealedUnreadable, field, endpoint, err, me.ID)
	}
	return fmt.Errorf("%w: the %s of endpoint %q: %v", errSealedUnreadable, field, endpoint, err)
}

// checkCredentials opens every stored credential before the worker
// starts: one it cannot open refuses the start (errSealedUnreadable); a
// plaintext secret left from before is a warning.
func checkCredentials(ctx context.Context, store *outbox.Store, k *sealed.Keyring, log *slog.Logger) error {
	all, err := store.Credentials(ctx)
	if err != nil {
		return fmt.Errorf("read the endpoints' credentials: %w", err)
	}
	n, err := openCredentials(k, all)
	if err != nil {
		return err
	}
	// Every secret opens: the marks of the workers that could not open one
	// (endpoints.Store.SecretUnreadable) are of a key file no longer in use here.
	if err := store.ClearSecretUnreadable(ctx, ""); err != nil {
		return err
	}
	if n > 0 {
		log.Warn("worker: endpoint secrets are stored in plaintext: run `worker keys encrypt-existing` with WEBHOOK_SECRETS_KEY_FILE",
			"plaintext_secrets", n)
	}
	return nil
}
