package pgcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// rewindable lets pg_rewind make a former primary a standby of the one
// promoted in its place: it needs hint-bit changes in the WAL, and the
// WAL since the last checkpoint before the two diverged, which the
// checkpoint ending the crash recovery it runs first would otherwise
// recycle. It goes in postgresql.conf, not on the command line, so that
// this single-user recovery keeps it too.
const rewindable = "wal_log_hints = on\nwal_keep_size = '256MB'\n"

// unsynced spares a test's cluster the fsync calls (as initdb,
// pg_basebackup and pg_rewind are run with --no-sync): the tests crash
// its server (pg_ctl stop -m immediate), never the machine, and what the
// server wrote before it died is in the operating system's cache whether
// or not it was flushed to the disk. A standby made with pg_basebackup
// copies it with postgresql.conf.
const unsynced = "fsync = off\n"

// replicationWait bounds the wait for a standby to stream.
const replicationWait = 60 * time.Second

// Standby makes a streaming standby of c with pg_basebackup, on a free
// port, starts it, and makes it c's synchronous standby: once Standby
// returns, a commit on c returns only once the standby has it, so that
// every committed transaction survives c's loss. The standby's own
// configuration names no synchronous standby: promoted alone, it does not
// wait for one. It is stopped and removed when the test ends.
func (c *Cluster) Standby() *Cluster {
	c.t.Helper()
	s := newCluster(c.t)
	if out, err := s.run("pg_basebackup", "-D", s.data(), "-d", c.conninfo(), "-X", "stream", "-R", "-c", "fast", "--no-sync"); err != nil {
		c.t.Fatalf("pgcluster: pg_basebackup: %v\n%s", err, out)
	}
	if err := s.ctl("start"); err != nil {
		c.t.Fatal(err)
	}
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"} {
		if err := c.exec(q); err != nil {
			c.t.Fatal(err)
		}
	}
	c.waitStreaming("sync")
	return s
}

// Crash stops the server in immediate mode, as a crash or a lost machine
// would: no shutdown checkpoint, every connection cut.
func (c *Cluster) Crash() error { return c.ctl("stop", "-m", "immediate") }

// Promote makes a standby a primary and returns once it takes writes.
func (c *Cluster) Promote() error { return c.ctl("promote") }

// Rejoin makes c, a former primary stopped after primary was promoted in
// its place, a standby of primary: pg_rewind takes back what c wrote that
// primary never received and writes the standby's settings (-R); c then
// starts and streams from primary. Rejoin returns once it has replayed
// what primary wrote before; a failure fails the test.
func (c *Cluster) Rejoin(primary *Cluster) {
	c.t.Helper()
	// A promoted server writes its new timeline into its control file at
	// its next checkpoint; until then pg_rewind reads the old one and
	// finds nothing to rewind.
	if err := primary.exec("CHECKPOINT"); err != nil {
		c.t.Fatal(err)
	}
	if out, err := c.run("pg_rewind", "-D", c.data(), "--source-server", primary.conninfo(), "-R", "--no-sync"); err != nil {
		c.t.Fatalf("pgcluster: pg_rewind: %v\n%s", err, out)
	}
	if err := c.ctl("start"); err != nil {
		c.t.Fatal(err)
	}
	c.waitReplayed(primary)
}

// FailoverURL is a connection string for database db listing the
// clusters' addresses in order, with target_session_attrs=read-write: a
// client connects to the first that takes writes.
func FailoverURL(db string, clusters ...*Cluster) string {
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", c.Port)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		strings.Join(hosts, ","), db)
}

// conninfo is the libpq connection string replication tools use.
func (c *Cluster) conninfo() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres", c.Port)
}

// waitStreaming waits until c has a standby streaming from it, with
// sync_state syncState (any when "").
func (c *Cluster) waitStreaming(syncState string) {
	c.t.Helper()
	const q = `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND ($1 = '' OR sync_state = $1)`
	waitfor.True(c.t, replicationWait, "a standby streaming from "+c.conninfo(), func() bool {
		var n int
		err := c.withConn(func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, q, syncState).Scan(&n)
		})
		return err == nil && n > 0
	})
}

// waitReplayed waits until standby c has replayed the WAL primary has
// written so far.
func (c *Cluster) waitReplayed(primary *Cluster) {
	c.t.Helper()
	var lsn string
	if err := primary.withConn(func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	}); err != nil {
		c.t.Fatal(err)
	}
	waitfor.True(c.t, replicationWait, "the standby on port "+strconv.Itoa(c.Port)+" replaying up to "+lsn, func() bool {
		var done bool
		err := c.withConn(func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done)
		})
		return err == nil && done
	})
}

// exec runs one statement on c's postgres database.
func (c *Cluster) exec(sql string) error {
	return c.withConn(func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql)
		return err
	})
}

// withConn runs f on a connection of its own to c's postgres database.
func (c *Cluster) withConn(f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer conn.Close(ctx)
	if err := f(ctx, conn); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// appendConf appends lines to postgresql.conf.
func (c *Cluster) appendConf(lines string) error {
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := f.WriteString(lines); err != nil {
		f.Close()
		return fmt.Errorf("pgcluster: %w", err)
	}
	return f.Close()
}
