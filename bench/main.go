// Command bench compares the Fluxora webhook worker with River and with a
// poll-only loop on a local PostgreSQL, delivering to a loopback consumer.
//
//	cd bench && go run .
//
// See README.md for the modes, the flags and how to read the table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	modes, systems   []string
	events           int // latency mode
	pollEvents       int // latency mode, poll-only system
	retryEvents      int
	backlog          int // drain mode
	tailBacklog      int // tail and tail-hang modes
	duration         time.Duration
	producers        int
	costPairs        int
	costDuration     time.Duration
	db, worker       string
	json             bool
	dump             string // directory for per-event CSV files, "" for none
	tunedBatch       int
	tunedConcurrency int
	noisyDuration    time.Duration // noisy mode, each of its two runs
	fanoutEvents     int
	flowEvents       int // flow mode
	// fanoutFilterEvents and fanoutFilterRounds size fanout-filter: events
	// per run, and rounds of runs (one of each variant).
	fanoutFilterEvents, fanoutFilterRounds int
	// The scale modes' sizes: stuck's pending rows (scale-backlog), the
	// endpoints of scale-many, the processed rows within and past
	// retention (scale-history).
	scaleBacklog, scaleMany int
	scaleKept, scaleExpired int
	// The ordering modes' sizes: keys of order-keys and order-blocked,
	// events of order-hot's one key.
	orderKeys, orderHot int
	// workerBefore is the worker-before system's binary: the release
	// before ordered delivery, on its own schema.
	workerBefore string
	// pgbouncer runs the worker's DATABASE_URL and the producers through a
	// private PgBouncer in transaction mode (latency and drain modes, the
	// worker systems only); WEBHOOK_LISTEN_DATABASE_URL stays direct.
	pgbouncer bool
	// payloadBytes pads every payload of the drain's backlog with a "pad"
	// string of this many bytes, the same for every system (0: none).
	payloadBytes int
	// pairs is how many rounds each mode runs: in each, every system
	// once, alternating which goes first (rounds.go).
	pairs int
	// results is the file -results writes (results.go), "" for none.
	results string
	// command is the command line that reproduces the run.
	command string
}

func main() {
	if os.Getenv(riverChildEnv) == "1" {
		os.Exit(riverChildMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modes := fs.String("modes", strings.Join(allModes, ","), "comma-separated modes to run; the scale modes only when named (\"scale\": all of them)")
	systems := fs.String("systems", strings.Join(defaultSystems, ","), "comma-separated systems to run (worker-before, worker-before-tuned: with -worker-before)")
	fs.IntVar(&o.events, "events", 300, "latency mode: events, one every 10ms")
	fs.IntVar(&o.pollEvents, "poll-events", 30, "latency mode: events for the poll-only system, spread over 1.1 poll intervals")
	fs.IntVar(&o.retryEvents, "retry-events", 200, "retry mode: events, one every 10ms, each failing its first attempt")
	fs.IntVar(&o.backlog, "backlog", 20000, "drain mode: rows inserted before the system starts")
	fs.IntVar(&o.tailBacklog, "tail-backlog", 40000, "tail and tail-hang modes: rows inserted before the system starts")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "burst mode: how long the producers insert")
	fs.IntVar(&o.producers, "producers", 8, "burst and cost modes: concurrent producers")
	fs.IntVar(&o.costPairs, "cost-pairs", 5, "cost mode: trigger on/off pairs (after one discarded warm-up run)")
	fs.DurationVar(&o.costDuration, "cost-duration", 3*time.Second, "cost mode: length of each run")
	fs.StringVar(&o.db, "db", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "admin database URL (creates and drops fluxora_bench_* databases)")
	fs.StringVar(&o.worker, "worker", "", "prebuilt worker binary (default: build ../cmd/worker into a temp dir)")
	fs.BoolVar(&o.json, "json", false, "print machine-readable JSON instead of the table")
	fs.StringVar(&o.dump, "dump", "", "write per-event latency-mode CSV files (seq, insert start, commit, receipt) into this directory")
	fs.IntVar(&o.tunedBatch, "tuned-batch", 100, "worker-tuned: WEBHOOK_BATCH_SIZE")
	fs.IntVar(&o.tunedConcurrency, "tuned-concurrency", 200, "worker-tuned: WEBHOOK_CONCURRENCY")
	fs.DurationVar(&o.noisyDuration, "noisy-duration", 20*time.Second, "noisy mode: how long each of its two runs inserts 100 events/s")
	fs.IntVar(&o.fanoutEvents, "fanout-events", 200, "fanout mode: events, one every 20ms, each to 100 endpoints")
	fs.IntVar(&o.flowEvents, "flow-events", 20000, "flow mode: deliveries pending for the rate-limited API")
	fs.IntVar(&o.fanoutFilterEvents, "fanout-filter-events", 2000, "fanout-filter: events per run, each to 10 endpoints")
	fs.IntVar(&o.fanoutFilterRounds, "fanout-filter-rounds", 3, "fanout-filter: rounds of runs, one of each variant (plain, filtered, typed), their order rotating")
	fs.IntVar(&o.scaleBacklog, "scale-backlog", 1_000_000, "scale-backlog: pending rows of the stuck endpoint")
	fs.IntVar(&o.scaleMany, "scale-many", 1000, "scale-many: endpoints, one event each")
	fs.IntVar(&o.scaleKept, "scale-history-kept", 3_000_000, "scale-history: processed rows within retention (7d)")
	fs.IntVar(&o.scaleExpired, "scale-history-expired", 1_000_000, "scale-history: processed rows past retention (8-10 days old)")
	fs.IntVar(&o.orderKeys, "order-keys", 10_000, "order-keys, order-blocked: keys (10 events each in order-keys; blocked in order-blocked)")
	fs.IntVar(&o.orderHot, "order-hot", 1000, "order-hot: events of the one key")
	fs.StringVar(&o.workerBefore, "worker-before", "", "worker-before and worker-before-tuned systems: a worker binary of an earlier release (built from an earlier commit)")
	fs.IntVar(&o.payloadBytes, "payload-bytes", 0, "drain mode: pad every payload of the backlog with a string of this many bytes, the same for every system (a real event is often 1-4 KiB)")
	fs.BoolVar(&o.pgbouncer, "pgbouncer", false, "worker DATABASE_URL and producers through a private PgBouncer in transaction mode (modes latency, drain; worker systems); default -modes latency,drain -systems worker-defaults,worker-tuned")
	fs.IntVar(&o.pairs, "pairs", 0, "rounds of each mode, every system once a round, alternating which goes first; each figure the median of its rounds, "+
		"each ratio the median of the rounds' ratios (default 3 with more than one system, else 1; 1: single runs)")
	fs.StringVar(&o.results, "results", "", "also write the medians and ratios as Markdown to this file (bench/RESULTS.md)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.pgbouncer {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["modes"] {
			*modes = modeLatency + "," + modeDrain
		}
		if !set["systems"] {
			*systems = sysWorkerDefaults + "," + sysWorkerTuned
		}
	}
	var err error
	if o.modes, err = pick("-modes", expandScale(*modes), knownModes); err != nil {
		return o, err
	}
	if o.systems, err = pick("-systems", *systems, allSystems); err != nil {
		return o, err
	}
	if o.events < 1 || o.pollEvents < 1 || o.retryEvents < 1 || o.backlog < 1 || o.tailBacklog < 1 ||
		o.producers < 1 || o.costPairs < 1 || o.fanoutEvents < 1 || o.flowEvents < 2 || o.scaleBacklog < 1 || o.scaleMany < 1 ||
		o.scaleKept < 1 || o.scaleExpired < 1 || o.orderKeys < 1 || o.orderHot < 1 || o.fanoutFilterEvents < 1 || o.fanoutFilterRounds < 1 {
		return o, errors.New("-events, -poll-events, -retry-events, -backlog, -tail-backlog, -producers, -cost-pairs, -fanout-events, " +
			"-fanout-filter-events, -fanout-filter-rounds and the -scale-* sizes must be at least 1, -flow-events at least 2")
	}
	if o.pairs < 0 {
		return o, errors.New("-pairs must be at least 1")
	}
	if o.pairs == 0 {
		o.pairs = 1
		if len(o.systems) > 1 {
			o.pairs = 3
		}
	}
	if (slices.Contains(o.systems, sysWorkerBefore) || slices.Contains(o.systems, sysWorkerBeforeTuned)) && o.workerBefore == "" {
		return o, errors.New("-systems worker-before and worker-before-tuned need -worker-before, a worker binary of an earlier release")
	}
	if o.duration <= 0 || o.costDuration <= 0 || o.noisyDuration <= 0 {
		return o, errors.New("-duration, -cost-duration and -noisy-duration must be positive")
	}
	if o.pgbouncer && (slices.ContainsFunc(o.modes, func(m string) bool { return m != modeLatency && m != modeDrain }) ||
		slices.ContainsFunc(o.systems, func(s string) bool { return s != sysWorkerDefaults && s != sysWorkerTuned })) {
		return o, errors.New("-pgbouncer runs only the latency and drain modes of worker-defaults and worker-tuned")
	}
	return o, nil
}

// expandScale replaces the alias "scale" in a -modes list with every
// scale mode.
func expandScale(list string) string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		switch strings.TrimSpace(s) {
		case scaleAlias:
			out = append(out, scaleModes...)
			continue
		case orderAlias:
			out = append(out, orderModes...)
			continue
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// pick parses a comma list, keeping known's order and rejecting unknowns.
func pick(flagName, list string, known []string) ([]string, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("%s: unknown %q (known: %s)", flagName, s, strings.Join(known, ", "))
		}
		want[s] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: nothing selected", flagName)
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opt, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	opt.command = commandLine(args)
	rep, err := benchmark(ctx, opt, stderr)
	if rep != nil && opt.results != "" && err == nil {
		if werr := writeResultsFile(opt.results, rep); werr != nil {
			return werr
		}
	}
	if rep != nil {
		if opt.json {
			if jerr := writeJSON(stdout, rep); jerr != nil {
				return jerr
			}
		} else {
			writeTable(stdout, rep)
		}
	}
	return err
}

// benchmark runs every selected system through every selected mode. A
// failing mode is recorded and the rest go on; the report is returned even
// when ctx ends early.
func benchmark(ctx context.Context, opt options, log io.Writer) (*report, error) {
	bin := opt.worker
	needWorker := slices.ContainsFunc(opt.systems, func(s string) bool { return !strings.HasPrefix(s, "river-") })
	if bin == "" && needWorker {
		tmp, err := os.MkdirTemp("", "fluxora-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if bin, err = buildWorker(ctx, tmp); err != nil {
			return nil, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	secret := "fluxora-bench-secret"
	cons, err := newConsumer([]byte(secret))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	dbs, err := openDatabases(ctx, opt.db)
	if err != nil {
		return nil, err
	}
	defer dbs.Close()

	rep := &report{Options: opt.summary(), Started: time.Now(), Machine: machine(ctx, dbs), Command: opt.command, Pairs: opt.pairs}
	var cs []*contender
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	for _, name := range opt.systems {
		sys := newSystem(name, opt, bin, self, common{name: name, consumerURL: cons.URL(), secret: secret, pad: padding(opt.payloadBytes)})
		fmt.Fprintf(log, "bench: %s (%s)\n", name, sys.Settings())
		c := prepare(ctx, opt, dbs, cons, sys)
		cs = append(cs, c)
		if !c.ok() {
			fmt.Fprintf(log, "bench: %s: setup: %s\n", name, firstLine(c.res.Errors["setup"]))
		}
	}
	rep.rounds = runRounds(ctx, opt, cs, log)
	every := &report{}
	for j, c := range cs {
		per := make([]SystemResult, len(rep.rounds))
		for i := range rep.rounds {
			per[i] = rep.rounds[i][j]
			every.Systems = append(every.Systems, per[i])
		}
		res := medianResults(per)
		if e := c.res.Errors["setup"]; e != "" {
			res.Errors["setup"] = e
		}
		rep.Systems = append(rep.Systems, res)
	}
	if opt.pairs > 1 {
		rep.Rounds = rep.rounds
	}
	rep.BadSignatures = cons.badSignatures.Load() + endpointBadSignatures(every)
	rep.Elapsed = time.Since(rep.Started)
	return rep, ctx.Err()
}

// commandLine is the command that reproduces a run with args, from bench/.
func commandLine(args []string) string {
	out := "go run ."
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\*?;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out += " " + a
	}
	return out
}

// machine describes where the bench runs.
func machine(ctx context.Context, dbs *databases) string {
	var version string
	if err := dbs.admin.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		version = "?"
	}
	return fmt.Sprintf("%d CPUs (%s), PostgreSQL %s, %s", runtime.NumCPU(), cpuModel(), version, runtime.Version())
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "?".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func newSystem(name string, opt options, bin, self string, c common) system {
	switch name {
	case sysWorkerTuned:
		return &workerSystem{common: c, bin: bin, env: tunedEnv(opt.tunedBatch, opt.tunedConcurrency)}
	case sysWorkerTunedIdle:
		return &workerSystem{common: c, bin: bin, env: tunedEnv(opt.tunedBatch, opt.tunedConcurrency), idle: true}
	case sysWorkerTunedDead:
		return &workerSystem{common: c, bin: bin, env: tunedEnv(opt.tunedBatch, opt.tunedConcurrency), dead: opt.scaleBacklog}
	case sysWorkerTunedTraced:
		return &workerSystem{common: c, bin: bin, env: tunedEnv(opt.tunedBatch, opt.tunedConcurrency), traced: true}
	case sysRiverDefaults:
		return &riverSystem{common: c, bin: self, maxWorkers: riverDefaultWorkers}
	case sysRiverTuned:
		return &riverSystem{common: c, bin: self, maxWorkers: 100,
			fetchCooldown: time.Millisecond, fetchPollInterval: 50 * time.Millisecond}
	case sysRiver200:
		return &riverSystem{common: c, bin: self, maxWorkers: river200Workers,
			fetchCooldown: time.Millisecond, fetchPollInterval: 50 * time.Millisecond}
	case sysPollOnly:
		return &workerSystem{common: c, bin: bin, pollOnly: true}
	case sysWorkerBefore:
		return &workerSystem{common: c, bin: opt.workerBefore}
	case sysWorkerBeforeTuned:
		return &workerSystem{common: c, bin: opt.workerBefore, env: tunedEnv(opt.tunedBatch, opt.tunedConcurrency)}
	default:
		return &workerSystem{common: c, bin: bin}
	}
}

// buildWorker builds ../cmd/worker (relative to the bench directory, the
// working directory of `go run .` and `go test`) into dir.
func buildWorker(ctx context.Context, dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(wd)
	if _, err := os.Stat(filepath.Join(root, "cmd", "worker")); err != nil {
		return "", fmt.Errorf("no ../cmd/worker from %s: run from bench/ or pass -worker", wd)
	}
	bin := filepath.Join(dir, "worker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/worker")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build worker: %w\n%s", err, out)
	}
	return bin, nil
}
