package sealed

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxKeyFileBytes is the largest key file ParseKeyFile reads (64 KiB:
// about a thousand keys). A larger one is refused, not cut: a cut file
// could lose the keys that open some stored credentials, or end inside a
// key.
const MaxKeyFileBytes = 64 << 10

// errKeyFileTooLarge is ParseKeyFile's error for a file over
// MaxKeyFileBytes.
var errKeyFileTooLarge = errors.New("is over 64 KiB (one key a line; about a thousand keys fit): refused, not cut")

// ParseKeyFile reads a key file: one key a line, "ID:BASE64", the base64
// (standard, padded or not) of KeySize random bytes; the first line's key
// seals, every key opens. Each line is trimmed of the spaces, tabs and CR
// around it; blank lines and lines starting with # are skipped. A file
// over MaxKeyFileBytes is refused. An id is 1-64 letters, digits, ".",
// "_" or "-", each at most once. Errors name the line, never its key.
func ParseKeyFile(r io.Reader) (*Keyring, error) {
	text, err := io.ReadAll(io.LimitReader(r, MaxKeyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(text) > MaxKeyFileBytes {
		return nil, errKeyFileTooLarge
	}
	k := &Keyring{keys: map[string][]byte{}}
	for i, line := range strings.Split(string(text), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, key, err := parseKeyLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if k.keys[id] != nil {
			return nil, fmt.Errorf("line %d: key id %q is listed twice", n, id)
		}
		k.ids = append(k.ids, id)
		k.keys[id] = key
	}
	if len(k.ids) == 0 {
		return nil, errors.New("holds no key (one line ID:BASE64 of 32 random bytes; worker keys generate prints one)")
	}
	return k, nil
}

func parseKeyLine(line string) (string, []byte, error) {
	id, enc, ok := strings.Cut(line, ":")
	if !ok {
		return "", nil, errors.New("must be ID:BASE64")
	}
	if !validID(id) {
		return "", nil, errors.New(`the key id must be 1-64 letters, digits, ".", "_" or "-"`)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(enc)
	}
	if err != nil || len(key) != KeySize {
		return "", nil, fmt.Errorf("key %q must be the standard base64 of %d bytes", id, KeySize)
	}
	return id, key, nil
}

// validID reports whether id may name a key: 1-64 letters, digits, ".",
// "_" or "-" (no ":", which ends it in a sealed value).
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// GenerateKeyLine returns a new key file line, "ID:BASE64" of KeySize bytes
// from crypto/rand, without a line ending.
func GenerateKeyLine(id string) (string, error) {
	if !validID(id) {
		return "", errors.New(`the key id must be 1-64 letters, digits, ".", "_" or "-"`)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(key), nil
}
