package main

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/pgbouncer"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// A worker whose listen connection goes through PgBouncer in transaction
// mode refuses to start (exit 2, naming WEBHOOK_LISTEN_DATABASE_URL), and
// claims nothing before: it never runs deaf. The password of the URLs is
// never printed.
func TestPgBouncerListenRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		settings []string
		env      func(direct, bounced string) map[string]string
		log      string // also expected in the log
	}{{
		name: "DATABASE_URL through PgBouncer, WEBHOOK_LISTEN_DATABASE_URL unset",
		env:  func(_, bounced string) map[string]string { return map[string]string{"DATABASE_URL": bounced} },
		log:  "refused the startup parameters",
	}, {
		name:     "a PgBouncer that ignores the startup parameters",
		settings: []string{"ignore_startup_parameters = synchronous_commit,plan_cache_mode"},
		env:      func(_, bounced string) map[string]string { return map[string]string{"DATABASE_URL": bounced} },
		log:      "ignored the startup parameters",
	}, {
		name: "WEBHOOK_LISTEN_DATABASE_URL through PgBouncer",
		env: func(direct, bounced string) map[string]string {
			return map[string]string{"DATABASE_URL": direct, "WEBHOOK_LISTEN_DATABASE_URL": bounced}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			bounced := withPassword(t, pgbouncer.Start(t, db.URL, tc.settings...).URL(), "s3cretpw")
			db.Insert(t, "e", `{}`)
			c := newConsumer(t, nil)
			p := startProcess(t, envFor("", c, tc.env(db.URL, bounced)))
			if code := p.wait(t, 60*time.Second); code != exitUsage {
				t.Fatalf("exit %d, want %d", code, exitUsage)
			}
			logs := p.logs.String()
			if !strings.Contains(logs, "WEBHOOK_LISTEN_DATABASE_URL") || !strings.Contains(logs, tc.log) || strings.Contains(logs, "s3cretpw") {
				t.Fatalf("the refusal does not name WEBHOOK_LISTEN_DATABASE_URL (or %q), or prints the password:\n%s", tc.log, logs)
			}
			if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND lease_token IS NULL"); n != 1 || len(c.deliveries()) != 0 {
				t.Fatalf("the refused worker claimed or delivered (%d rows untouched, %d requests)", n, len(c.deliveries()))
			}
		})
	}
}

// withPassword gives a URL a password (PgBouncer's trust auth ignores it).
func withPassword(t *testing.T, raw, password string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String()
}

// A direct DATABASE_URL keeps the direct path (named prepared statements,
// generic plans, asynchronous commits); a WEBHOOK_LISTEN_DATABASE_URL of its
// own says DATABASE_URL is pooled; a PgBouncer in session mode, which
// refuses the direct path's startup parameters, gets the pooled path and
// its LISTEN passes the check. Each delivers.
func TestPgBouncerPathChoice(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	session := pgbouncer.Start(t, db.URL, "pool_mode = session").URL()
	c := newConsumer(t, nil)
	for i, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{}, []string{`"database_path":"direct"`}},
		{map[string]string{"WEBHOOK_LISTEN_DATABASE_URL": db.URL + "&application_name=x"}, []string{`"database_path":"pooled"`}},
		{map[string]string{"DATABASE_URL": session}, []string{`"database_path":"pooled"`, "refused the startup parameters"}},
	} {
		w := startInProcess(t, envFor(db.URL, c, tc.env))
		startedWorker(t, w.logs)
		for _, want := range tc.want {
			if !strings.Contains(w.logs.String(), want) {
				t.Fatalf("%v: want %s in\n%s", tc.env, want, w.logs.String())
			}
		}
		db.Insert(t, "e", `{}`)
		waitfor.True(t, 20*time.Second, "delivered", func() bool { return len(c.byID()) == i+1 })
		if code := w.stop(t); code != exitOK {
			t.Fatalf("%v: exit %d", tc.env, code)
		}
	}
}

func TestConfigListenURL(t *testing.T) {
	t.Parallel()
	env := validEnv()
	get := func(k string) string { return env[k] }
	cfg, err := loadConfig(get)
	if err != nil || cfg.ListenURL != env["DATABASE_URL"] {
		t.Fatalf("unset: %q, %v; want DATABASE_URL", cfg.ListenURL, err)
	}
	env["WEBHOOK_LISTEN_DATABASE_URL"] = "postgres://app@db-primary:5432/app"
	if cfg, err = loadConfig(get); err != nil || cfg.ListenURL != env["WEBHOOK_LISTEN_DATABASE_URL"] {
		t.Fatalf("set: %q, %v", cfg.ListenURL, err)
	}
	env["WEBHOOK_LISTEN_DATABASE_URL"] = "postgres://app:s3cretpw@db:notaport/app"
	_, err = loadConfig(get)
	if err == nil || !strings.Contains(err.Error(), "WEBHOOK_LISTEN_DATABASE_URL: is not a valid PostgreSQL connection string") ||
		strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("bad value: %v", err)
	}
}
