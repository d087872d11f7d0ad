package main

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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// bouncer is a private PgBouncer in transaction mode in front of one bench
// database (-pgbouncer): the worker's DATABASE_URL and the producers go
// through it, the worker's WEBHOOK_LISTEN_DATABASE_URL does not. The same
// setup as the tests' internal/pgbouncer (this module cannot import it):
// pgbouncer from PATH or /usr/sbin, run as the postgres user when the bench
// runs as root, on a free loopback port, trust auth, default_pool_size 20,
// no ignore_startup_parameters.
type bouncer struct {
	dir, url string
	cmd      *exec.Cmd
	done     chan struct{}
}

// startBouncer starts PgBouncer in front of dbURL's database and waits until
// a query through it is answered.
func startBouncer(ctx context.Context, dbURL string) (*bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer"
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, errors.New("-pgbouncer: pgbouncer not found (apt-get install pgbouncer)")
	}
	target, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fluxora-bench-pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &bouncer{dir: dir}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(err, b.stop())
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b.url = (&url.URL{Scheme: "postgres", User: url.User(target.User), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path: "/" + target.Database, RawQuery: "sslmode=disable"}).String()
	cred, err := b.writeConfig(target, port)
	if err != nil {
		return nil, errors.Join(err, b.stop())
	}
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := b.cmd.Start(); err != nil {
		return nil, errors.Join(err, b.stop())
	}
	b.done = make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	if err := b.await(ctx); err != nil {
		return nil, errors.Join(err, b.stop())
	}
	return b, nil
}

// writeConfig writes pgbouncer.ini and its auth file, owned by the postgres
// user when running as root; it returns that user's credential (nil
// otherwise).
func (b *bouncer) writeConfig(target *pgconn.Config, port int) (*syscall.Credential, error) {
	db := fmt.Sprintf("host=%s port=%d dbname=%s user=%s", target.Host, target.Port, target.Database, target.User)
	if target.Password != "" {
		db += " password=" + target.Password
	}
	ini := strings.Join([]string{"[databases]", target.Database + " = " + db, "[pgbouncer]",
		"listen_addr = 127.0.0.1", "listen_port = " + strconv.Itoa(port), "unix_socket_dir = " + b.dir,
		"auth_type = trust", "auth_file = " + filepath.Join(b.dir, "users.txt"), "pool_mode = transaction",
		"max_client_conn = 200", "default_pool_size = 20", "logfile = " + filepath.Join(b.dir, "pgbouncer.log"), ""}, "\n")
	if err := os.WriteFile(filepath.Join(b.dir, "pgbouncer.ini"), []byte(ini), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", target.User)), 0o600); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("-pgbouncer as root needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range []string{b.dir, filepath.Join(b.dir, "pgbouncer.ini"), filepath.Join(b.dir, "users.txt")} {
		if err := os.Chown(p, uid, gid); err != nil {
			return nil, err
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (b *bouncer) await(ctx context.Context) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, b.url)
		if err == nil {
			_, err = conn.Exec(cctx, "SELECT 1")
			conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-b.done:
			log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
			return fmt.Errorf("pgbouncer exited at start: %s", log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgbouncer: no answer within 20s: %w", err)
		}
	}
}

// stop ends PgBouncer (SIGTERM, then SIGKILL after 10 s) and removes its
// directory.
func (b *bouncer) stop() error {
	defer os.RemoveAll(b.dir)
	if b.cmd == nil || b.cmd.Process == nil || b.done == nil {
		return nil
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		return errors.New("pgbouncer: killed after 10s")
	}
}
