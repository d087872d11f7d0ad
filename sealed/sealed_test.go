package sealed_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/sealed"
)

func keyring(t *testing.T, ids ...string) (*sealed.Keyring, string) {
	t.Helper()
	var lines []string
	for _, id := range ids {
		l, err := sealed.GenerateKeyLine(id)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	text := strings.Join(lines, "\n") + "\n"
	k, err := sealed.ParseKeyFile(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return k, text
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	k, _ := keyring(t, "k1", "k0")
	const secret = "whsec_c2VjcmV0"
	ad := sealed.EndpointSecret("0b3c6a4e-0000-4000-8000-000000000001")
	v, err := k.Seal([]byte(secret), ad)
	if err != nil {
		t.Fatal(err)
	}
	if !sealed.IsSealed(v) || strings.Contains(v, secret) || !strings.HasPrefix(v, "fxsealed:v1:k1:") {
		t.Fatalf("sealed value %q", v)
	}
	if again, _ := k.Seal([]byte(secret), ad); again == v {
		t.Fatal("two seals of one secret are equal: the nonce is not fresh")
	}
	t.Run("opens bound to its row and field only", func(t *testing.T) {
		got, err := k.Open(v, ad)
		if err != nil || string(got) != secret {
			t.Fatalf("Open: %q, %v", got, err)
		}
		for _, other := range []string{sealed.EndpointSecret("0b3c6a4e-0000-4000-8000-000000000002"),
			sealed.EndpointClientKey("0b3c6a4e-0000-4000-8000-000000000001")} {
			if _, err := k.Open(v, other); !errors.Is(err, sealed.ErrOpen) {
				t.Errorf("Open under %s: %v, want ErrOpen", other, err)
			}
		}
	})
	t.Run("a missing key id is named", func(t *testing.T) {
		other, _ := keyring(t, "k0")
		var me *sealed.MissingKeyError
		if _, err := other.Open(v, ad); !errors.As(err, &me) || me.ID != "k1" {
			t.Fatalf("Open without k1: %v", err)
		}
		var none *sealed.Keyring
		if _, err := none.Open(v, ad); !errors.As(err, &me) || me.ID != "k1" {
			t.Fatalf("Open without a keyring: %v", err)
		}
		if _, err := none.Seal([]byte("x"), ad); !errors.Is(err, sealed.ErrNoKeys) {
			t.Fatalf("Seal without a keyring: %v", err)
		}
	})
	t.Run("another key under the same id does not open", func(t *testing.T) {
		impostor, _ := keyring(t, "k1")
		_, err := impostor.Open(v, ad)
		if !errors.Is(err, sealed.ErrOpen) || strings.Contains(err.Error(), v) {
			t.Fatalf("Open with another k1: %v", err)
		}
	})
	t.Run("a damaged value does not open", func(t *testing.T) {
		for _, bad := range []string{v[:len(v)-2], v[:20], v + "!", strings.Replace(v, ":k1:", ":k 1:", 1), "fxsealed:v9:k1:AAAA"} {
			if _, err := k.Open(bad, ad); err == nil {
				t.Errorf("Open(%q) succeeded", bad)
			}
		}
	})
	t.Run("a plaintext is returned as it is", func(t *testing.T) {
		if got, err := k.Open(secret, ad); err != nil || string(got) != secret {
			t.Fatalf("Open(plaintext): %q, %v", got, err)
		}
	})
}

func TestReseal(t *testing.T) {
	t.Parallel()
	old, oldText := keyring(t, "old")
	ad := sealed.EndpointSecret("id")
	v, _ := old.Seal([]byte("s3cret"), ad)
	newLine, _ := sealed.GenerateKeyLine("new")
	both, err := sealed.ParseKeyFile(strings.NewReader(newLine + "\n" + oldText))
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := both.Reseal(v, ad)
	if err != nil || !changed {
		t.Fatalf("Reseal: %v, changed %v", err, changed)
	}
	if id, _ := sealed.KeyID(out); id != "new" {
		t.Fatalf("resealed under %q", id)
	}
	if same, changed, err := both.Reseal(out, ad); err != nil || changed || same != out {
		t.Fatalf("Reseal of a primary value: changed %v, %v", changed, err)
	}
	plain, changed, err := both.Reseal("plain", ad)
	if err != nil || !changed || !sealed.IsSealed(plain) {
		t.Fatalf("Reseal of a plaintext: %q, %v, %v", plain, changed, err)
	}
}

func TestParseKeyFile(t *testing.T) {
	t.Parallel()
	good, _ := sealed.GenerateKeyLine("a")
	second, _ := sealed.GenerateKeyLine("b")
	k, err := sealed.ParseKeyFile(strings.NewReader("# keys\n\n" + good + "\r\n" + second + "\n"))
	if err != nil || k.Primary() != "a" || len(k.IDs()) != 2 {
		t.Fatalf("ParseKeyFile: %v, %v", k.IDs(), err)
	}
	// Lines are trimmed of the spaces, tabs and CR around them.
	k, err = sealed.ParseKeyFile(strings.NewReader(" \t" + good + " \t\r\n\t" + second + "  "))
	if err != nil || k.Primary() != "a" || len(k.IDs()) != 2 {
		t.Fatalf("ParseKeyFile of padded lines: %v, %v", k, err)
	}
	// A file of exactly MaxKeyFileBytes is read; one byte more is refused,
	// not cut (a cut file would have been read as the key alone).
	pad := func(n int) string { return good + "\n" + strings.Repeat("#", n-len(good)-1) }
	if _, err := sealed.ParseKeyFile(strings.NewReader(pad(sealed.MaxKeyFileBytes))); err != nil {
		t.Fatalf("ParseKeyFile of %d bytes: %v", sealed.MaxKeyFileBytes, err)
	}
	if _, err := sealed.ParseKeyFile(strings.NewReader(pad(sealed.MaxKeyFileBytes + 1))); err == nil || !strings.Contains(err.Error(), "over 64 KiB") {
		t.Fatalf("ParseKeyFile of %d bytes: %v, want it refused", sealed.MaxKeyFileBytes+1, err)
	}
	key := strings.SplitN(good, ":", 2)[1]
	for _, tc := range []struct{ text, want string }{
		{"", "holds no key"},
		{"# only a comment\n", "holds no key"},
		{"nocolon\n", "line 1: must be ID:BASE64"},
		{":" + key, "line 1: the key id"},
		{"a b:" + key, "line 1: the key id"},
		{"a:" + key[:20], `line 1: key "a" must be the standard base64 of 32 bytes`},
		{"a:!!!!", "line 1: key"},
		{good + "\n" + good, `line 2: key id "a" is listed twice`},
	} {
		_, err := sealed.ParseKeyFile(strings.NewReader(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKeyFile(%q): %v, want %q", tc.text, err, tc.want)
		} else if strings.Contains(err.Error(), key) {
			t.Errorf("error %q quotes the key", err)
		}
	}
	if _, err := sealed.GenerateKeyLine("bad:id"); err == nil {
		t.Error("GenerateKeyLine accepted an id with a colon")
	}
}
