package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/pgcluster"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// A real restart of a PostgreSQL server the test owns: the listener and the
// pool reconnect, /readyz goes unready then ready, and the backlog written
// right after the restart is delivered promptly (the poll is a minute away).
// Five requests are in flight across the restart (claimed before it,
// answered while the server is down): their outcomes are written once it is
// back, or their rows are taken over when their leases expire; none is lost.
func TestPostgresRestartMidRun(t *testing.T) {
	t.Parallel()
	cl := pgcluster.Start(t)
	dbURL := cl.URL("postgres")
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	c := newConsumer(t, func(d delivery) int {
		if bytes.Contains(d.Body, []byte(`"held"`)) && d.Attempt == 1 {
			<-hold
		}
		return http.StatusOK
	})
	t.Cleanup(release)
	env := envFor(dbURL, c, nil)
	if code := startProcess(t, env, "migrate").wait(t, 30*time.Second); code != 0 {
		t.Fatalf("migrate exit %d", code)
	}
	p := startProcess(t, env)
	base := metricsBase(t, p.logs)
	waitfor.True(t, 20*time.Second, "ready", func() bool { return ready(base) })

	insertAs := func(key string, from, n int) {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for i := from; i < from+n; i++ {
			_, err := conn.Exec(context.Background(), "INSERT INTO webhook_outbox (event_type, payload) VALUES ('e', $1)", fmt.Sprintf(`{"%s":%d}`, key, i))
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	insert := func(from, n int) { t.Helper(); insertAs("i", from, n) }
	insert(0, 20)
	waitfor.True(t, 10*time.Second, "first 20 delivered", func() bool { return len(c.byID()) == 20 })
	insertAs("held", 0, 5)
	waitfor.True(t, 10*time.Second, "5 requests in flight", func() bool { return len(c.byID()) == 25 })

	stopped := time.Now()
	if err := cl.Stop(); err != nil {
		t.Fatal(err)
	}
	release() // answered while the server is down
	waitfor.True(t, 20*time.Second, "unready while PostgreSQL is down", func() bool { return !ready(base) })
	unready := time.Since(stopped)
	if err := cl.StartAgain(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	insert(20, 20)
	waitfor.True(t, 15*time.Second, "backlog after the restart delivered promptly", func() bool { return len(c.byID()) == 45 })
	backlog := time.Since(started)
	waitfor.True(t, 20*time.Second, "ready again", func() bool { return ready(base) })
	insert(40, 1)
	waitfor.True(t, 5*time.Second, "new event after recovery", func() bool { return len(c.byID()) == 46 })
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pending int
	waitfor.True(t, 30*time.Second, "the 5 requests in flight across the restart recorded", func() bool {
		return conn.QueryRow(context.Background(), "SELECT count(*) FROM webhook_outbox WHERE NOT processed").Scan(&pending) == nil && pending == 0
	})
	sent := len(c.deliveries())
	figures(t, "/readyz unready %v after the stop; 20-event backlog delivered %v after the start (poll 60 s); 46 events, 5 in flight across the restart, %d requests, lost 0",
		unready.Round(time.Millisecond), backlog.Round(time.Millisecond), sent)
}
