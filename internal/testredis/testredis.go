// Package testredis starts a private, throw-away redis-server for fault tests
// that must stop, pause or restart Redis (never the shared one).
package testredis

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a private redis-server process on a loopback port.
type Server struct {
	Port int
	t    testing.TB
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs redis-server (no persistence) on a free port until the test
// ends. A missing redis-server binary fails the test.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("testredis: redis-server not found (install redis-server)")
	}
	dir, err := os.MkdirTemp("", "fluxora-redis-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Port: freePort(t), t: t, dir: dir}
	t.Cleanup(func() {
		s.Kill()
		_ = os.RemoveAll(dir)
	})
	if err := s.StartAgain(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is a redis:// URL for database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// StartAgain starts the server on its port (after Kill) and waits until it
// answers PING.
func (s *Server) StartAgain() error {
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port),
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("testredis: start: %w", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.ping() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testredis: server on %s did not answer PING within 10s", s.Addr())
		}
		select {
		case <-s.done:
			return fmt.Errorf("testredis: redis-server on %s exited at start", s.Addr())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Kill stops the server at once (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing is
// answered. Resume undoes it.
func (s *Server) Pause() {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("testredis: pause: %v", err)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() {
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatalf("testredis: resume: %v", err)
	}
}

// ping sends one inline PING and expects +PONG.
func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
