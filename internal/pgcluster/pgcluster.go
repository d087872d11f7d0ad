// Package pgcluster starts a private, throw-away PostgreSQL server for fault
// tests that must stop and restart the database (never the shared one),
// and streaming standbys of it, promoted and rejoined as a failover does
// (replica.go). It uses initdb, pg_ctl, pg_basebackup and pg_rewind from
// /usr/lib/postgresql/*/bin, run as the postgres user when the test runs
// as root; a missing one fails the test, never skips it.
package pgcluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// Cluster is a private PostgreSQL server.
type Cluster struct {
	Dir  string
	Port int
	bin  string
	t    testing.TB
}

// Start initialises and starts a cluster on a free port; it is stopped and
// removed when the test ends. A missing PostgreSQL installation fails the
// test.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c := newCluster(t)
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("pgcluster: initdb: %v\n%s", err, out)
	}
	if err := c.appendConf(rewindable + unsynced); err != nil {
		t.Fatal(err)
	}
	if err := c.ctl("start"); err != nil {
		t.Fatal(err)
	}
	return c
}

// newCluster makes the directory of a cluster on a free port, removed
// (its server stopped) when the test ends.
func newCluster(t testing.TB) *Cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Fatal("pgcluster: no /usr/lib/postgresql/*/bin/pg_ctl (install postgresql)")
	}
	sort.Strings(bins)
	dir, err := os.MkdirTemp("", "fluxora-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Port: freePort(t), bin: filepath.Dir(bins[len(bins)-1]), t: t}
	t.Cleanup(func() {
		_ = c.ctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if err := c.chown(); err != nil {
		t.Fatal(err)
	}
	return c
}

// URL is a connection string for database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Stop stops the server (fast mode: connections are cut).
func (c *Cluster) Stop() error { return c.ctl("stop", "-m", "fast") }

// StartAgain starts a stopped server on the same port.
func (c *Cluster) StartAgain() error { return c.ctl("start") }

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) ctl(args ...string) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.Port, c.Dir)
	full := append([]string{args[0], "-D", c.data(), "-w", "-l", filepath.Join(c.Dir, "log"), "-o", opts}, args[1:]...)
	if out, err := c.run("pg_ctl", full...); err != nil {
		return fmt.Errorf("pgcluster: pg_ctl %s: %v\n%s", args[0], err, out)
	}
	return nil
}

func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("pgcluster: no %s (install PostgreSQL's server and client programs): %w", path, err)
	}
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	return cmd.CombinedOutput()
}

// chown gives the directory to the postgres user when running as root.
func (c *Cluster) chown() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(c.Dir, uid, gid)
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
