package main

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"time"
)

// contender is one system set up for the whole invocation: its database,
// its producers' pool and the runner that runs its modes.
type contender struct {
	r       *runner
	res     SystemResult // name, settings, database; a setup error
	cleanup []func()
}

func (c *contender) ok() bool { return c.res.Errors["setup"] == "" }

func (c *contender) close() {
	for i := len(c.cleanup) - 1; i >= 0; i-- {
		c.cleanup[i]()
	}
}

// prepare gives sys a fresh database (dropped by close) and sets it up.
// A setup error is recorded in res.Errors["setup"].
func prepare(ctx context.Context, opt options, dbs *databases, cons *consumer, sys system) *contender {
	c := &contender{res: SystemResult{Name: sys.Name(), Settings: sys.Settings(), Errors: map[string]string{}}}
	fail := func(err error) *contender { c.res.Errors["setup"] = err.Error(); return c }
	name, dbURL, err := dbs.create(ctx, sys.Name())
	if err != nil {
		return fail(err)
	}
	c.res.Database = name
	c.cleanup = append(c.cleanup, func() { dbs.drop(name) }) //nolint:errcheck // Close reports what is left
	if opt.pgbouncer {
		b, err := startBouncer(ctx, dbURL)
		if err != nil {
			return fail(err)
		}
		c.cleanup = append(c.cleanup, func() { b.stop() }) //nolint:errcheck
		c.res.Settings += "; DATABASE_URL and producers through PgBouncer (transaction mode), WEBHOOK_LISTEN_DATABASE_URL direct"
		sys.(*workerSystem).listenURL = dbURL
		dbURL = b.url + "&default_query_exec_mode=cache_describe" // producers: no named prepared statements
	}
	pool, err := openPool(ctx, dbURL, int32(opt.producers+2))
	if err != nil {
		return fail(err)
	}
	c.cleanup = append(c.cleanup, pool.Close)
	c.cleanup = append(c.cleanup, sys.close)
	if err := sys.setup(ctx, dbURL, pool); err != nil {
		return fail(err)
	}
	c.r = &runner{opt: opt, sys: sys, pool: pool, cons: cons}
	return c
}

// runRounds runs every selected mode opt.pairs times on every system that
// runs it: for each mode, round after round, each round every system once,
// in the order of cs in the first round and the reverse in the second,
// and so on, so that no system always runs first and each round's
// runs are minutes apart at most. It returns each round's results, one
// SystemResult per system in the order of cs.
func runRounds(ctx context.Context, opt options, cs []*contender, log io.Writer) [][]SystemResult {
	rounds := make([][]SystemResult, opt.pairs)
	for i := range rounds {
		rounds[i] = make([]SystemResult, len(cs))
		for j, c := range cs {
			rounds[i][j] = SystemResult{Name: c.res.Name, Settings: c.res.Settings, Database: c.res.Database, Errors: map[string]string{}}
		}
	}
	for _, mode := range opt.modes {
		for round := range opt.pairs {
			for _, j := range roundOrder(len(cs), round) {
				c := cs[j]
				if !c.ok() || !runsMode(c.r.sys, mode) {
					continue
				}
				c.r.round = round + 1
				t0, spans0 := time.Now(), traceSpans(c.r.sys)
				var one SystemResult
				err := c.r.runMode(ctx, mode, &one)
				one.Duplicates += c.r.cons.snapshot().dups
				mergeResult(&rounds[round][j], one, mode)
				status := "ok"
				if err != nil {
					rounds[round][j].Errors[mode] = err.Error()
					status = "error: " + firstLine(err.Error())
				}
				// The pool's idle connections would otherwise stay open
				// while the other systems run.
				c.r.pool.Reset()
				spans := ""
				if n := traceSpans(c.r.sys) - spans0; n > 0 {
					spans = fmt.Sprintf(", %d spans exported", n)
				}
				fmt.Fprintf(log, "bench: %-13s %d/%d %-19s %s (%s%s)\n", mode, round+1, opt.pairs, c.res.Name, status,
					time.Since(t0).Round(100*time.Millisecond), spans)
				if ctx.Err() != nil {
					return rounds
				}
			}
		}
	}
	return rounds
}

// roundOrder is the order the n systems run in round round (from 0):
// as given in even rounds, reversed in odd ones.
func roundOrder(n, round int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if round%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// mergeResult adds one mode's result to a round's result for the system.
// The scale modes each bring their own ScaleResult (a baseline run before
// the situation, and after it when it is bracketed), merged into dst's.
func mergeResult(dst *SystemResult, one SystemResult, mode string) {
	dv, ov := reflect.ValueOf(dst).Elem(), reflect.ValueOf(one)
	for i := range dv.NumField() {
		if f := ov.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() && dv.Type().Field(i).Name != "Scale" {
			dv.Field(i).Set(f)
		}
	}
	dst.Duplicates += one.Duplicates
	if one.Scale != nil {
		mergeScale(dst, one.Scale, mode)
	}
}

func mergeScale(dst *SystemResult, one *ScaleResult, mode string) {
	if dst.Scale == nil {
		dst.Scale = &ScaleResult{}
	}
	sc := dst.Scale
	if sc.Baseline == nil {
		sc.Baseline = one.Baseline
	}
	sc.Baselines = append(sc.Baselines, one.Baselines...)
	b := one.Around[mode]
	if b == nil && mode == modeOrderBlocked {
		b = one.Baseline // order-blocked is against the baseline run just before it
	}
	if b != nil {
		if sc.Around == nil {
			sc.Around = map[string]*ScaleBaseline{}
		}
		sc.Around[mode] = b
	}
	ov, sv := reflect.ValueOf(one).Elem(), reflect.ValueOf(sc).Elem()
	for i := range sv.NumField() {
		switch name := sv.Type().Field(i).Name; name {
		case "Baseline", "Baselines", "Around":
		default:
			if f := ov.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
				sv.Field(i).Set(f)
			}
		}
	}
	sc.Duplicates += one.Duplicates
	sc.BadSignatures += one.BadSignatures
	sc.Misrouted += one.Misrouted
}

// medianResults is one system's results over the rounds: every figure the
// median of its rounds' values (the mean of the middle two for an even
// count), but counts of what went wrong (missing, duplicate, early, bad
// signatures, …), which are the largest of any round, and hung events
// delivered, the smallest. Runs of a mode that did not complete in a round
// are left out; lists (the cost mode's runs, the scale baselines) are
// concatenated; errors are kept with their round.
func medianResults(rs []SystemResult) SystemResult {
	if len(rs) == 1 {
		return rs[0]
	}
	out := SystemResult{Name: rs[0].Name, Settings: rs[0].Settings, Database: rs[0].Database, Errors: map[string]string{}}
	vs := make([]reflect.Value, len(rs))
	for i := range rs {
		vs[i] = reflect.ValueOf(rs[i])
	}
	dv := reflect.ValueOf(&out).Elem()
	for i := range dv.NumField() {
		switch name := dv.Type().Field(i).Name; name {
		case "Name", "Settings", "Database", "Errors":
		default:
			fs := make([]reflect.Value, len(vs))
			for k, v := range vs {
				fs[k] = v.Field(i)
			}
			medianInto(dv.Field(i), fs, name)
		}
	}
	for i, r := range rs {
		for mode, e := range r.Errors {
			if mode == "setup" {
				out.Errors[mode] = e
				continue
			}
			out.Errors[mode] = cmpOr(out.Errors[mode], fmt.Sprintf("round %d: %s", i+1, e))
		}
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// worstIsMax are the counts of what went wrong: the round with the most
// is reported. worstIsMin: of hung events, how many were delivered.
var (
	worstIsMax = map[string]bool{"Missing": true, "Duplicates": true, "Early": true, "BadSignatures": true, "Misrouted": true,
		"Incomplete": true, "ColdMissing": true, "ExpiredLeft": true, "Left": true}
	worstIsMin = map[string]bool{"HungDelivered": true}
)

// medianInto sets dst from vs, one value per round, as medianResults says.
func medianInto(dst reflect.Value, vs []reflect.Value, name string) {
	switch dst.Kind() {
	case reflect.Pointer:
		var present []reflect.Value
		for _, v := range vs {
			if !v.IsNil() {
				present = append(present, v.Elem())
			}
		}
		if len(present) == 0 {
			return
		}
		dst.Set(reflect.New(dst.Type().Elem()))
		medianInto(dst.Elem(), present, name)
	case reflect.Struct:
		for i := range dst.NumField() {
			fs := make([]reflect.Value, len(vs))
			for k, v := range vs {
				fs[k] = v.Field(i)
			}
			medianInto(dst.Field(i), fs, dst.Type().Field(i).Name)
		}
	case reflect.Slice:
		out := reflect.MakeSlice(dst.Type(), 0, 0)
		for _, v := range vs {
			out = reflect.AppendSlice(out, v)
		}
		dst.Set(out)
	case reflect.Map:
		keys := map[any]reflect.Value{}
		for _, v := range vs {
			for _, k := range v.MapKeys() {
				keys[k.Interface()] = k
			}
		}
		if len(keys) == 0 {
			return
		}
		m := reflect.MakeMap(dst.Type())
		for _, k := range keys {
			var present []reflect.Value
			for _, v := range vs {
				if e := v.MapIndex(k); e.IsValid() {
					present = append(present, e)
				}
			}
			e := reflect.New(dst.Type().Elem()).Elem()
			medianInto(e, present, name)
			m.SetMapIndex(k, e)
		}
		dst.Set(m)
	case reflect.Int, reflect.Int64:
		xs := make([]int64, len(vs))
		for i, v := range vs {
			xs[i] = v.Int()
		}
		slices.Sort(xs)
		switch {
		case worstIsMax[name]:
			dst.SetInt(xs[len(xs)-1])
		case worstIsMin[name]:
			dst.SetInt(xs[0])
		default:
			n := len(xs)
			dst.SetInt((xs[(n-1)/2] + xs[n/2]) / 2)
		}
	case reflect.Float64:
		xs := make([]float64, len(vs))
		for i, v := range vs {
			xs[i] = v.Float()
		}
		dst.SetFloat(median(xs))
	case reflect.Bool:
		all := true
		for _, v := range vs {
			all = all && v.Bool()
		}
		dst.SetBool(all)
	case reflect.String:
		for _, v := range vs {
			if v.String() != "" {
				dst.SetString(v.String())
				return
			}
		}
	default:
		panic(fmt.Sprintf("medianInto: %s of kind %s", name, dst.Kind()))
	}
}

// median is the middle of xs, or the mean of the middle two; 0 for none.
// xs is sorted in place.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	slices.Sort(xs)
	return (xs[(n-1)/2] + xs[n/2]) / 2
}

// traceSpans is how many spans sys's OTLP sink has received, 0 for a
// system that does not trace.
func traceSpans(sys system) int64 {
	if w, ok := sys.(*workerSystem); ok {
		return w.traceSpans()
	}
	return 0
}
