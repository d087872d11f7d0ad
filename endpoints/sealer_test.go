package endpoints_test

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/fluxora/webhook-worker/endpoints"
)

// testSealer is a Sealer whose values are readable, bound to their
// endpoint id like package sealed's (which cmd/worker wires in and whose
// own tests cover the cipher): "fxsealed:v1:test:" and the base64 of the
// id, a NUL and the value.
type testSealer struct{}

var _ endpoints.Sealer = testSealer{}

const testPrefix = "fxsealed:v1:test:"

func (testSealer) SealSecret(id, secret string) (string, error) {
	return testPrefix + base64.StdEncoding.EncodeToString([]byte(id+"\x00"+secret)), nil
}

func (testSealer) SealClientKey(id string, key []byte) (string, error) {
	return testSealer{}.SealSecret(id, "key:"+string(key))
}

func (testSealer) OpenClientKey(id, stored string) ([]byte, error) {
	v, err := testSealer{}.OpenSecret(id, stored)
	return []byte(strings.TrimPrefix(v, "key:")), err
}

func (testSealer) OpenSecret(id, stored string) (string, error) {
	enc, ok := strings.CutPrefix(stored, testPrefix)
	if !ok {
		return stored, nil // a plaintext
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	v, found := strings.CutPrefix(string(b), id+"\x00")
	if err != nil || !found {
		return "", errors.New("does not open for this endpoint")
	}
	return v, nil
}
