package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fluxora/webhook-worker/endpoints"
)

// certFileMax bounds a certificate or key file read (1 MiB).
const certFileMax = 1 << 20

// certSource is the client certificate flags of add and update.
type certSource struct {
	cert, key *string
	none      *bool // update only: remove the certificate
}

func certFlags(fs *flag.FlagSet) certSource {
	c := certSource{
		cert: fs.String("client-cert-file", "", "client certificate for mutual TLS: PEM chain, leaf first (with --client-key-file)"),
		key:  fs.String("client-key-file", "", "the client certificate's PEM private key, stored encrypted"),
	}
	if fs.Name() == "worker endpoints update" {
		c.none = fs.Bool("no-client-cert", false, "remove the endpoint's client certificate")
	}
	return c
}

// value reads the files given: nil for none, an empty ClientCert for
// --no-client-cert. No message quotes a file's content.
func (c certSource) value(cmd string, stderr io.Writer) (*endpoints.ClientCert, int) {
	remove := c.none != nil && *c.none
	switch {
	case remove && (*c.cert != "" || *c.key != ""):
		fmt.Fprintf(stderr, "worker endpoints %s: give --no-client-cert or --client-cert-file, not both\n", cmd)
		return nil, exitUsage
	case remove:
		return &endpoints.ClientCert{}, exitOK
	case *c.cert == "" && *c.key == "":
		return nil, exitOK
	case *c.cert == "" || *c.key == "":
		fmt.Fprintf(stderr, "worker endpoints %s: --client-cert-file and --client-key-file come together\n", cmd)
		return nil, exitUsage
	}
	var out endpoints.ClientCert
	for _, f := range []struct {
		flag, path string
		into       *[]byte
	}{{"client-cert-file", *c.cert, &out.CertPEM}, {"client-key-file", *c.key, &out.KeyPEM}} {
		b, err := readLimited(f.path)
		if err != nil {
			fmt.Fprintf(stderr, "worker endpoints %s: --%s: %v\n", cmd, f.flag, err)
			return nil, exitUsage
		}
		*f.into = b
	}
	return &out, exitOK
}

// readLimited reads a file of at most certFileMax bytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // names the path and why, never the content
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, certFileMax+1))
	if err == nil && len(b) > certFileMax {
		err = fmt.Errorf("%s is over %d bytes", path, certFileMax)
	}
	return b, err
}

// certText is what add and update print of an endpoint's client
// certificate: when it expires.
func certText(e endpoints.Endpoint) string {
	if e.ClientCertNotAfter == nil {
		return ""
	}
	return ", client certificate until " + e.ClientCertNotAfter.UTC().Format(time.RFC3339)
}
