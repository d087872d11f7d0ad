package docsnippets

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/signingkey"
)

// signedCase is one request the sender signed and what a verifier holding
// key must say of it: "true", "false", or "error" for a key that does not
// read.
type signedCase struct {
	Name      string            `json:"name"`
	PublicKey string            `json:"public_key"`
	Headers   map[string]string `json:"headers"` // lower-case names, as Node's req.headers
	Body      string            `json:"body"`    // base64
	Want      string            `json:"want"`
	header    http.Header
	body      []byte
}

// capture signs and sends req with cfg and returns the request as the
// consumer received it.
func capture(t *testing.T, cfg sender.Config, req sender.Request) (http.Header, []byte) {
	t.Helper()
	var h http.Header
	var body []byte
	res := send(t, cfg, req, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
	}))
	if res.Outcome != sender.Delivered {
		t.Fatalf("%+v", res)
	}
	return h, body
}

func generateKey(t *testing.T) (private, public string) {
	t.Helper()
	k, err := signingkey.Generate(signingkey.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return k, signingkey.Public([]byte(k))
}

// ed25519Cases are requests the worker's sender signed, each with the
// verdict a correct check gives.
func ed25519Cases(t *testing.T) []signedCase {
	t.Helper()
	priv, pub := generateKey(t)
	_, otherPub := generateKey(t)
	oldPriv, oldPub := generateKey(t)
	req := request("5b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01")
	fresh := sender.Config{Secret: []byte(priv)}
	stale := sender.Config{Secret: []byte(priv), Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }}
	rotating := sender.Config{Secret: []byte(priv), PreviousSecret: []byte(oldPriv), PreviousUntil: time.Now().Add(time.Hour)}
	var cases []signedCase
	add := func(name string, cfg sender.Config, key, want string, change func([]byte) []byte) {
		h, body := capture(t, cfg, req)
		if change != nil {
			body = change(bytes.Clone(body))
		}
		c := signedCase{Name: name, PublicKey: key, Headers: map[string]string{}, Body: base64.StdEncoding.EncodeToString(body), Want: want,
			header: h, body: body}
		for k := range h {
			c.Headers[strings.ToLower(k)] = h.Get(k)
		}
		cases = append(cases, c)
	}
	add("its key", fresh, pub, "true", nil)
	add("another key", fresh, otherPub, "false", nil)
	add("a changed body", fresh, pub, "false", func(b []byte) []byte { return bytes.Replace(b, []byte("10"), []byte("11"), 1) })
	add("signed ten minutes ago", stale, pub, "false", nil)
	add("rotation, the new key", rotating, pub, "true", nil)
	add("rotation, the old key", rotating, oldPub, "true", nil)
	add("an HMAC secret's request", sender.Config{Secret: []byte(whsec)}, pub, "false", nil)
	add("the private key as the key", fresh, priv, "error", nil)
	return cases
}

// The page's Go blocks for ed25519: the kit holding the public key, and
// the check by hand with crypto/ed25519, give each case its verdict.
func TestEd25519GoSnippets(t *testing.T) {
	for _, c := range ed25519Cases(t) {
		byHand := verifyEd25519(c.PublicKey, c.header, c.body, time.Now())
		req, _ := http.NewRequest(http.MethodPost, "/hook", bytes.NewReader(c.body))
		req.Header = c.header
		_, err := newKeyVerifier(c.PublicKey).Verify(req)
		kit := err == nil
		if want := c.Want == "true"; byHand != want || kit != want {
			t.Errorf("%s: by hand %v, kit %v (%v), want %v", c.Name, byHand, kit, err, want)
		}
	}
}

// jsHarness runs the page's JavaScript block on the cases of the file
// named first on its command line, printing "name: verdict" for each.
const jsHarness = `
import fs from "node:fs";
for (const c of JSON.parse(fs.readFileSync(process.argv[2], "utf8"))) {
  let got;
  try {
    got = String(verifyEd25519(publicKeyFrom(c.public_key), c.headers, Buffer.from(c.body, "base64")));
  } catch (err) {
    got = "error";
  }
  console.log(c.name + ": " + got);
}
`

// pyHarness is jsHarness for the Python block.
const pyHarness = `
import json, sys
for c in json.load(open(sys.argv[1])):
    try:
        got = str(verify_ed25519(public_key_from(c["public_key"]), c["headers"], base64.b64decode(c["body"]))).lower()
    except ValueError:
        got = "error"
    print(c["name"] + ": " + got)
`

// The page's JavaScript and Python ed25519 blocks, as they stand there,
// run with node and python3 on requests the worker's sender signed: each
// case gets its verdict. Neither runtime missing skips: the test fails
// (scripts/services.sh installs them).
func TestEd25519SnippetsRunInNodeAndPython(t *testing.T) {
	md, err := os.ReadFile("../../docs/consumers.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	casesFile := filepath.Join(dir, "cases.json")
	cases := ed25519Cases(t)
	b, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(casesFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, c := range cases {
		want.WriteString(c.Name + ": " + c.Want + "\n")
	}
	for _, lang := range []struct {
		fence, marker, file, harness string
		runtime                      func(t *testing.T) string
	}{
		{"js", "function verifyEd25519", "verify.mjs", jsHarness, node},
		{"python", "def verify_ed25519", "verify.py", pyHarness, pythonWithCryptography},
	} {
		t.Run(lang.fence, func(t *testing.T) {
			block := fencedBlock(t, md, lang.fence, lang.marker)
			path := filepath.Join(dir, lang.file)
			if err := os.WriteFile(path, []byte(block+lang.harness), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(lang.runtime(t), path, casesFile).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", lang.file, err, out)
			}
			if string(out) != want.String() {
				t.Fatalf("the %s block's verdicts:\n%s\nwant:\n%s", lang.fence, out, want.String())
			}
		})
	}
}

// fencedBlock returns the one ```lang block of md that holds marker.
func fencedBlock(t *testing.T, md []byte, lang, marker string) string {
	t.Helper()
	var found []string
	var cur *strings.Builder
	for line := range strings.Lines(string(md)) {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```"+lang:
			cur = new(strings.Builder)
		case cur != nil && trimmed == "```":
			if strings.Contains(cur.String(), marker) {
				found = append(found, cur.String())
			}
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	if len(found) != 1 {
		t.Fatalf("docs/consumers.md has %d ```%s blocks holding %q, want 1", len(found), lang, marker)
	}
	return found[0]
}

// node is Node.js, which the machine has (scripts/services.sh installs
// Debian's nodejs where it is missing).
func node(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required (apt-get install nodejs; scripts/services.sh does)")
	}
	return path
}

// pythonWithCryptography is a python3 that imports the cryptography
// package: the one on PATH, else Debian's (/usr/bin/python3, to which
// scripts/services.sh adds python3-cryptography where no python3 has it).
func pythonWithCryptography(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err == nil && exec.Command(path, "-c", "import cryptography.hazmat.primitives.asymmetric.ed25519").Run() == nil {
			return path
		}
	}
	t.Fatal("no python3 imports the cryptography package (apt-get install python3-cryptography; scripts/services.sh does)")
	return ""
}
