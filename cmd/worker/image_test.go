package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/verify"
)

// imageMaxBytes is the most the worker's image may weigh.
const imageMaxBytes = 30 << 20

// podman runs Debian's podman as scripts/image.sh does (runc, cgroupfs)
// and returns its trimmed stdout, failing the test with its stderr.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podmanErr(args...)
	if err != nil {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func podmanErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append([]string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &podmanError{err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type podmanError struct {
	err    error
	stderr string
}

func (e *podmanError) Error() string { return e.err.Error() + ": " + e.stderr }

// buildImage builds the image with scripts/image.sh under a version of its
// own, and removes it at the test's end.
func buildImage(t *testing.T) (image, version string) {
	t.Helper()
	version = "imagetest-" + randomHex(t, 6)
	cmd := exec.Command("../../scripts/image.sh", version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, stderr.String())
	}
	image = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if _, err := podmanErr("rmi", "--force", image); err != nil {
			t.Logf("remove image %s: %v", image, err)
		}
	})
	if want := "fluxora-webhook-worker:" + version; image != want {
		t.Fatalf("scripts/image.sh printed %q, want %q", image, want)
	}
	return image, version
}

// clusterRun is `podman run` as a cluster runs the worker: read-only root
// filesystem, every capability dropped, the non-root user, no privilege
// gained, the host's network (for the test database and consumer on
// loopback), the key file mounted read-only; each container named uniquely
// and removed at the test's end.
func clusterRun(t *testing.T, name, keyFile string, env map[string]string, image string, args ...string) []string {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podmanErr("logs", name)
			t.Logf("container %s logs:\n%s", name, logs)
		}
		if _, err := podmanErr("rm", "--force", "--time", "0", name); err != nil {
			t.Logf("remove container %s: %v", name, err)
		}
	})
	run := []string{"run", "--name", name,
		"--read-only", "--cap-drop", "all", "--user", "65532:65532",
		"--security-opt", "no-new-privileges", "--network", "host",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"-v", keyFile + ":/run/secrets/webhook.keys:ro",
		"-e", "WEBHOOK_SECRETS_KEY_FILE=/run/secrets/webhook.keys"}
	for k, v := range env {
		run = append(run, "-e", k+"="+v)
	}
	return append(append(run, image), args...)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// verifyingConsumer is a loopback consumer that checks every request with
// package verify and counts the verified deliveries by id; requests after
// the first holdAfter verified ones wait for release.
type verifyingConsumer struct {
	srv      *httptest.Server
	mu       sync.Mutex
	verified map[string]int
	failed   []string
	held     chan struct{} // one send per request held
	release  chan struct{}
	once     sync.Once
}

func newVerifyingConsumer(t *testing.T, secret string, holdAfter int) *verifyingConsumer {
	t.Helper()
	c := &verifyingConsumer{verified: map[string]int{}, held: make(chan struct{}, 100), release: make(chan struct{})}
	v := &verify.Verifier{Secret: []byte(secret)}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := v.Verify(r)
		c.mu.Lock()
		if err != nil {
			c.failed = append(c.failed, err.Error())
			c.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		n := len(c.verified)
		c.verified[ev.DeliveryID]++
		c.mu.Unlock()
		if n >= holdAfter {
			c.held <- struct{}{}
			<-c.release
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.srv.Close)
	t.Cleanup(c.unblock) // before Close, which waits for handlers
	return c
}

// unblock lets the held requests, and every later one, be answered.
func (c *verifyingConsumer) unblock() { c.once.Do(func() { close(c.release) }) }

func (c *verifyingConsumer) counts() (verified map[string]int, failed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	verified = make(map[string]int, len(c.verified))
	for id, n := range c.verified {
		verified[id] = n
	}
	return verified, append([]string(nil), c.failed...)
}

// The image runs as a cluster runs it: `worker migrate` in one container,
// then the worker in another, read-only, without capabilities, as user
// 65532, its key file mounted from outside the image. It delivers 50
// events to an endpoint of the table, each signed so that package verify
// accepts it; SIGTERM while a request is in flight drains it (its outcome
// is recorded) and the container exits 0. The image is at most 30 MB and
// `worker version` names the version it was built with.
func TestImageRunsAsAClusterRunsIt(t *testing.T) {
	t.Parallel()
	image, version := buildImage(t)
	size, err := strconv.ParseInt(podman(t, "image", "inspect", "--format", "{{.Size}}", image), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if size > imageMaxBytes {
		t.Fatalf("image is %d bytes, over the %d allowed", size, imageMaxBytes)
	}
	if out := podman(t, "run", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", image, "version"); !strings.HasPrefix(out, "worker "+version+",") {
		t.Fatalf("worker version in the image printed %q, want the version %s", out, version)
	}

	db := testdb.NewEmpty(t)
	// The key file, the container user's own, mode 0600, as a Secret
	// mounted with defaultMode 0600 and fsGroup would be.
	dir := t.TempDir()
	keyFile := writeKeyFile(dir, "webhook.keys", "image-1")
	if err := os.Chown(keyFile, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	suffix := randomHex(t, 4)
	env := map[string]string{"DATABASE_URL": db.URL}

	migrate := "fluxora-imagetest-migrate-" + suffix
	if out := podman(t, clusterRun(t, migrate, keyFile, env, image, "migrate")...); !strings.Contains(out, "applied") {
		t.Fatalf("worker migrate in the container printed %q", out)
	}

	// The endpoint, its secret sealed under the key file.
	secretBytes := make([]byte, 32)
	if _, err := rand.Read(secretBytes); err != nil {
		t.Fatal(err)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(secretBytes)
	secretFile := filepath.Join(dir, "endpoint.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const events = 50
	c := newVerifyingConsumer(t, secret, events)
	var out, errb bytes.Buffer
	hostEnv := map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_SECRETS_KEY_FILE": keyFile}
	if code := run(context.Background(), []string{"endpoints", "add", "--name", "cluster", "--url", c.srv.URL, "--secret-file", secretFile},
		func(k string) string { return hostEnv[k] }, &out, &errb); code != exitOK {
		t.Fatalf("endpoints add: exit %d: %s", code, errb.String())
	}

	worker := "fluxora-imagetest-worker-" + suffix
	args := clusterRun(t, worker, keyFile, map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_METRICS_ADDR": "127.0.0.1:0"}, image)
	podman(t, append([]string{"run", "--detach"}, args[1:]...)...)
	insertTx(t, db, events)
	waitfor.True(t, 60*time.Second, "50 events delivered and verified", func() bool {
		verified, _ := c.counts()
		return len(verified) >= events
	})
	// One more event, held by the consumer: SIGTERM comes while its
	// request is in flight, and the worker drains it before exiting.
	insertTx(t, db, 1)
	select {
	case <-c.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the held request did not arrive")
	}
	podman(t, "kill", "--signal", "TERM", worker)
	c.unblock()
	code := podman(t, "wait", worker)
	if code != "0" {
		t.Fatalf("the worker's container exited %s after SIGTERM, want 0", code)
	}
	verified, failed := c.counts()
	if len(failed) > 0 {
		t.Fatalf("%d requests failed verification, the first: %s", len(failed), failed[0])
	}
	for id, n := range verified {
		if n != 1 {
			t.Fatalf("delivery %s verified %d times, want once", id, n)
		}
	}
	if len(verified) != events+1 {
		t.Fatalf("%d deliveries verified, want %d", len(verified), events+1)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 0 {
		t.Fatalf("%d rows left unprocessed after the drain, want 0", n)
	}

	// The console, its token from a file mounted into the container too.
	token := "Console-Token-XYZ-" + randomHex(t, 16) // 12 distinct characters whatever the random part
	tokenFile := filepath.Join(dir, "console.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tokenFile, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	console := "fluxora-imagetest-console-" + suffix
	cargs := clusterRun(t, console, keyFile, map[string]string{"DATABASE_URL": db.URL,
		"WEBHOOK_CONSOLE_TOKEN_FILE": "/run/secrets/console.token", "WEBHOOK_CONSOLE_ADDR": "127.0.0.1:0"}, image, "console")
	podman(t, append([]string{"run", "--detach", "-v", tokenFile + ":/run/secrets/console.token:ro"}, cargs[1:]...)...)
	var base string
	waitfor.True(t, 30*time.Second, "the console serving", func() bool {
		logs, _ := podmanErr("logs", console)
		_, rest, ok := strings.Cut(logs, "console: serving ")
		base, _, _ = strings.Cut(rest, "\n")
		base = strings.TrimSuffix(base, "/")
		return ok && base != ""
	})
	req, err := http.NewRequest(http.MethodGet, base+"/api/endpoints", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"cluster"`) {
		t.Fatalf("GET /api/endpoints with the mounted token: %d %s", res.StatusCode, body)
	}
	podman(t, "kill", "--signal", "TERM", console)
	if code := podman(t, "wait", console); code != "0" {
		t.Fatalf("the console's container exited %s after SIGTERM, want 0", code)
	}
}
