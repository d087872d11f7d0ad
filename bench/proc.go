package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports.
const clockTicks = 100

// stopTimeout is how long a process gets to exit after SIGTERM before it is
// killed.
const stopTimeout = 45 * time.Second

// proc is a system under test running as a child process. Its stderr and
// stdout are read line by line; the last lines are kept for error messages.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's result, set before exited closes

	// metrics is the worker's /metrics URL ("" for River's child).
	metrics string

	mu    sync.Mutex
	tail  []string
	lines chan string // every output line, for readiness checks; never blocks
}

// startProc runs path with args and exactly the environment env.
func startProc(name, path string, args, env []string) (*proc, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	// Its own process group: a Ctrl-C in the terminal reaches only the
	// bench, which stops its children itself, in order.
	// Pdeathsig: a bench that dies without cleaning up takes them along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{}), lines: make(chan string, 64)}
	var wg sync.WaitGroup
	wg.Go(func() { p.scan(stdout) })
	wg.Go(func() { p.scan(stderr) })
	go func() {
		wg.Wait()
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > 20 {
			p.tail = p.tail[1:]
		}
		p.mu.Unlock()
		select {
		case p.lines <- line:
		default: // nobody is waiting for readiness any more
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Pid is the child's process id.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// Tail returns the last lines the process printed.
func (p *proc) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// waitLine waits until the process prints a line for which match returns a
// non-empty value, and returns that value.
func (p *proc) waitLine(ctx context.Context, timeout time.Duration, match func(string) string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		select {
		case line := <-p.lines:
			if v := match(line); v != "" {
				return v, nil
			}
		case <-p.exited:
			return "", fmt.Errorf("%s exited before it was ready (%v):\n%s", p.name, p.err, p.Tail())
		case <-ctx.Done():
			return "", fmt.Errorf("%s not ready after %s: %w\n%s", p.name, timeout, ctx.Err(), p.Tail())
		}
	}
}

// Stop sends SIGTERM and waits for the process to exit, killing it after
// stopTimeout. It returns an error when the exit was not clean.
func (p *proc) Stop() error {
	select {
	case <-p.exited:
		return p.exitError()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitError()
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, stopTimeout)
	}
}

func (p *proc) exitError() error {
	if p.err != nil {
		return fmt.Errorf("%s: %w\n%s", p.name, p.err, p.Tail())
	}
	return nil
}

// CPU returns the user plus system CPU time the process has used so far.
func (p *proc) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/<pid>/stat. The command name (field 2) may contain spaces, so fields
// are counted from its closing parenthesis.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("proc stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// PeakRSS returns the process's peak resident set size (VmHWM) in bytes.
func (p *proc) PeakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmHWM:")
}

// parseStatusKB reads a "Key:   123 kB" line of /proc/<pid>/status, in bytes.
func parseStatusKB(status []byte, key string) (int64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: bad %s line %q", key, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc status: %w", err)
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("proc status: no %s line", key)
}

// backendCPU sums the CPU time of the PostgreSQL backends that serve the
// system under test (by application_name) on pool's database. It reads
// /proc, so it needs the server on this machine; it returns 0 when it cannot
// see a backend's process.
func backendCPU(ctx context.Context, pool *pgxpool.Pool, apps []string) (time.Duration, error) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = ANY($1)`, apps)
	if err != nil {
		return 0, fmt.Errorf("backend pids: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, fmt.Errorf("backend pids: %w", err)
	}
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone, or another machine's
		}
		if cpu, err := parseStatCPU(b); err == nil {
			total += cpu
		}
	}
	return total, nil
}
