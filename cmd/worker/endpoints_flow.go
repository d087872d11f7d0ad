package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// rateFlag is --rate: N/s or N/m (endpoints.ParseRate), checked with the
// other flags.
type rateFlag struct{ f webhook.Flow }

func (r *rateFlag) String() string {
	if r == nil || r.f.Rate == 0 {
		return ""
	}
	s, _ := endpoints.FormatFlow(webhook.Flow{Rate: r.f.Rate, Per: r.f.Per})
	return s
}

func (r *rateFlag) Set(s string) error {
	n, per, err := endpoints.ParseRate(s)
	if err != nil {
		return err
	}
	r.f.Rate, r.f.Per = n, per
	return nil
}

// flowFlags are an endpoint's flow control flags: --rate, --burst and
// --max-in-flight, and on update --no-rate and --no-max-in-flight.
type flowFlags struct {
	rate               rateFlag
	burst, inFlight    *int
	noRate, noInFlight *bool
}

const (
	rateUsage     = "at most N requests a second (N/s) or a minute (N/m), across every worker (default: no rate)"
	burstUsage    = "requests more than --rate at once, after a quiet moment"
	inFlightUsage = "at most M requests at a time, across every worker (0, the default: no limit)"
)

func newFlowFlags(fs *flag.FlagSet, update bool) *flowFlags {
	f := &flowFlags{}
	fs.Var(&f.rate, "rate", rateUsage)
	f.burst = rangeFlag(fs, "burst", 0, 0, endpoints.BurstMax, burstUsage)
	f.inFlight = rangeFlag(fs, "max-in-flight", 0, 0, endpoints.MaxInFlightMax, inFlightUsage)
	if update {
		f.noRate = fs.Bool("no-rate", false, "remove the rate (and its burst)")
		f.noInFlight = fs.Bool("no-max-in-flight", false, "remove the most in flight")
	}
	return f
}

// forAdd is the flow of a new endpoint; exitUsage (said on stderr) for
// --burst without --rate.
func (f *flowFlags) forAdd(fs *flag.FlagSet, stderr io.Writer) (webhook.Flow, int) {
	if flagGiven(fs, "burst") && !flagGiven(fs, "rate") {
		fmt.Fprintln(stderr, "worker endpoints add: --burst needs --rate")
		return webhook.Flow{}, exitUsage
	}
	return webhook.Flow{Rate: f.rate.f.Rate, Per: f.rate.f.Per, Burst: *f.burst, MaxInFlight: *f.inFlight}, exitOK
}

// forUpdate sets up's flow fields from the flags given; exitUsage (said on
// stderr) for a flag beside the one that clears it.
func (f *flowFlags) forUpdate(fs *flag.FlagSet, up *endpoints.Update, stderr io.Writer) int {
	for _, pair := range [][2]string{{"rate", "no-rate"}, {"burst", "no-rate"}, {"max-in-flight", "no-max-in-flight"}} {
		if flagGiven(fs, pair[0]) && flagGiven(fs, pair[1]) {
			fmt.Fprintf(stderr, "worker endpoints update: give --%s or --%s, not both\n", pair[0], pair[1])
			return exitUsage
		}
	}
	zero := 0
	switch {
	case flagGiven(fs, "rate"):
		up.Rate = &webhook.Flow{Rate: f.rate.f.Rate, Per: f.rate.f.Per}
	case *f.noRate:
		up.Rate, up.Burst = &webhook.Flow{}, &zero
	}
	if flagGiven(fs, "burst") {
		up.Burst = f.burst
	}
	switch {
	case flagGiven(fs, "max-in-flight"):
		up.MaxInFlight = f.inFlight
	case *f.noInFlight:
		up.MaxInFlight = &zero
	}
	return exitOK
}

// flowShown is an endpoint's flow control as list shows it (in --json:
// "rate" as --rate takes it, "burst", "max_in_flight", "paused_until").
type flowShown struct {
	flow        webhook.Flow
	Rate        string `json:"rate,omitempty"`
	Burst       int    `json:"burst,omitempty"`
	MaxInFlight int    `json:"max_in_flight,omitempty"`
	PausedUntil string `json:"paused_until,omitempty"`
}

func showFlow(f outbox.EndpointFlow) flowShown {
	s := flowShown{flow: f.Flow, Rate: f.RateSpec(), Burst: f.Burst, MaxInFlight: f.MaxInFlight}
	if !f.PausedUntil.IsZero() {
		s.PausedUntil = f.PausedUntil.UTC().Format(time.RFC3339)
	}
	return s
}
