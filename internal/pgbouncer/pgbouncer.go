// Package pgbouncer starts a private, throw-away PgBouncer in transaction
// mode in front of a test's database, for tests that run the worker, its
// producers and its operator commands the way most production PostgreSQL is
// reached. It runs the pgbouncer binary (PATH, then /usr/sbin/pgbouncer) as
// the postgres user when the test runs as root (PgBouncer refuses root), on
// a free loopback port, with its configuration, log, pid file and unix
// socket in a private directory. A missing binary fails the test.
package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PoolSizeDefault is the server connections PgBouncer opens per database
// and user (default_pool_size).
const PoolSizeDefault = 20

// MaxClientsDefault is the most client connections PgBouncer accepts
// (max_client_conn).
const MaxClientsDefault = 200

// startTimeout bounds the wait for PgBouncer to answer its first query.
const startTimeout = 20 * time.Second

// Bouncer is a running private PgBouncer.
type Bouncer struct {
	// Port is its loopback port.
	Port     int
	dir      string
	dbName   string
	user     string
	settings []string
	cmd      *exec.Cmd
	done     chan struct{}
}

// Start runs PgBouncer in transaction mode in front of the database of
// dbURL (its host, port, user, password and database name) until the test
// ends. settings are extra lines of its [pgbouncer] section
// ("ignore_startup_parameters = extra_float_digits"). It fails the test when
// pgbouncer is missing or does not start.
func Start(t testing.TB, dbURL string, settings ...string) *Bouncer {
	t.Helper()
	b, err := New(dbURL, settings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("pgbouncer log:\n%s", b.Log())
		}
		b.Remove()
	})
	return b
}

// New starts PgBouncer in front of dbURL's database; Stop and Remove end
// it. It is Start without a test (the benchmark uses it).
func New(dbURL string, settings ...string) (*Bouncer, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	target, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: database URL: %w", err)
	}
	dir, err := os.MkdirTemp("", "fluxora-pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &Bouncer{dir: dir, dbName: target.Database, user: target.User, settings: settings}
	var lastErr error
	for range 3 { // another process may take the free port first
		if b.Port, err = freePort(); err != nil {
			break
		}
		if err = b.writeConfig(target); err != nil {
			break
		}
		if err = b.start(bin); err == nil {
			return b, nil
		}
		lastErr = err
	}
	b.Remove()
	return nil, errors.Join(err, lastErr)
}

// URL is a connection string for the database through PgBouncer.
func (b *Bouncer) URL() string {
	u := url.URL{Scheme: "postgres", User: url.User(b.user), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port)),
		Path: "/" + b.dbName, RawQuery: "sslmode=disable"}
	return u.String()
}

// Log returns PgBouncer's log so far.
func (b *Bouncer) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return string(out)
}

// Stop shuts PgBouncer down at once (SIGTERM: client and server
// connections are closed) and waits for it, killing it after 10 s.
func (b *Bouncer) Stop() error {
	if b.cmd == nil {
		return nil
	}
	defer func() { b.cmd = nil }()
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		return errors.New("pgbouncer: did not stop within 10s of SIGTERM; killed")
	}
}

// Remove deletes the private directory (after Stop).
func (b *Bouncer) Remove() { _ = os.RemoveAll(b.dir) }

func binary() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("pgbouncer: binary not found in PATH or /usr/sbin (install the pgbouncer package; scripts/services.sh does)")
}

// writeConfig writes pgbouncer.ini and its auth file. Clients are trusted
// (loopback only); PgBouncer logs in to the server with the target's own
// user and password. No ignore_startup_parameters: a client that sends a
// startup parameter PgBouncer does not know is refused, as by a stock
// PgBouncer.
func (b *Bouncer) writeConfig(target *pgconn.Config) error {
	db := fmt.Sprintf("host=%s port=%d dbname=%s user=%s", target.Host, target.Port, target.Database, target.User)
	if target.Password != "" {
		db += " password=" + target.Password
	}
	ini := strings.Join([]string{
		"[databases]",
		target.Database + " = " + db,
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		"listen_port = " + strconv.Itoa(b.Port),
		"unix_socket_dir = " + b.dir,
		"auth_type = trust",
		"auth_file = " + filepath.Join(b.dir, "users.txt"),
		"pool_mode = transaction",
		"max_client_conn = " + strconv.Itoa(MaxClientsDefault),
		"default_pool_size = " + strconv.Itoa(PoolSizeDefault),
		"logfile = " + filepath.Join(b.dir, "pgbouncer.log"),
		"pidfile = " + filepath.Join(b.dir, "pgbouncer.pid"),
	}, "\n") + "\n" + strings.Join(append(b.settings, ""), "\n")
	if err := os.WriteFile(filepath.Join(b.dir, "pgbouncer.ini"), []byte(ini), 0o600); err != nil {
		return err
	}
	users := fmt.Sprintf("%q \"\"\n", target.User)
	if err := os.WriteFile(filepath.Join(b.dir, "users.txt"), []byte(users), 0o600); err != nil {
		return err
	}
	return b.chown()
}

// start runs pgbouncer in the foreground and waits until a query through it
// is answered.
func (b *Bouncer) start(bin string) error {
	b.cmd = exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cred, err := credential(); err != nil {
		return err
	} else if cred != nil {
		b.cmd.SysProcAttr.Credential = cred
	}
	out := &strings.Builder{}
	b.cmd.Stdout, b.cmd.Stderr = out, out
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("pgbouncer: start: %w", err)
	}
	b.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(b.cmd, b.done)
	deadline := time.Now().Add(startTimeout)
	for {
		err := b.ping()
		if err == nil {
			return nil
		}
		select {
		case <-b.done:
			b.cmd = nil
			return fmt.Errorf("pgbouncer: exited at start: %s%s", out.String(), b.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = b.Stop()
			return fmt.Errorf("pgbouncer: no answer on port %d within %v: %w", b.Port, startTimeout, err)
		}
	}
}

func (b *Bouncer) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// credential is the postgres user's when running as root, nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: running as root needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// chown gives the directory and its files to the postgres user when running
// as root.
func (b *Bouncer) chown() error {
	cred, err := credential()
	if err != nil || cred == nil {
		return err
	}
	return filepath.Walk(b.dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, int(cred.Uid), int(cred.Gid))
	})
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
