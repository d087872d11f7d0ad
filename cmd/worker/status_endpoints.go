package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/outbox"
)

// endpointStatus is one endpoint's line of `worker status`: the store's,
// and its breaker state.
type endpointStatus struct {
	outbox.EndpointStatus
	Circuit string `json:"circuit,omitempty"` // with REDIS_URL: closed, open, half-open, or why unknown
	// BlockedKeys and BlockedOldestSecs: its ordering keys that cannot
	// move now (the statement blocked_keys), and how long the longest blocked
	// has waited, in seconds.
	BlockedKeys       int64   `json:"blocked_keys"`
	BlockedOldestSecs float64 `json:"blocked_oldest_seconds"`
	// Rate and MaxInFlight are its flow control (as list shows them; ""
	// and 0: none); PausedUntil when its consumer's pause ends.
	Rate        string     `json:"rate,omitempty"`
	MaxInFlight int        `json:"max_in_flight,omitempty"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// Filter is its payload filter as stored; "": none.
	Filter string `json:"filter,omitempty"`
	url    string // the URL whose breaker it is: WEBHOOK_URL for the default endpoint
}

// endpointsStatus reads the endpoints' status; only, when not empty, names
// the one endpoint wanted.
func endpointsStatus(ctx context.Context, store *outbox.Store, cfg opsConfig, only string) ([]endpointStatus, error) {
	eps, err := store.EndpointStatus(ctx, cfg.WebhookURL != "", only)
	if err != nil {
		return nil, err
	}
	blocked, err := store.BlockedKeys(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]outbox.BlockedKeys, len(blocked))
	for _, b := range blocked {
		byName[b.Endpoint] = b
	}
	flows, err := store.EndpointFlows(ctx)
	if err != nil {
		return nil, err
	}
	flows[dispatcher.DefaultEndpointName] = flows[""]
	filters, err := store.EndpointFilters(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]endpointStatus, len(eps))
	for i, e := range eps {
		b := byName[e.Name]
		out[i] = endpointStatus{EndpointStatus: e, url: e.URL, BlockedKeys: b.Keys, BlockedOldestSecs: b.OldestSecs}
		out[i].Filter = filters[e.Name] // none for the WEBHOOK_URL endpoint: no table endpoint takes its name
		if e.Name == dispatcher.DefaultEndpointName && e.URL == "" {
			out[i].url = cfg.WebhookURL
		}
		if f, ok := flows[e.Name]; ok {
			out[i].Rate, out[i].MaxInFlight = showFlow(f).Rate, f.MaxInFlight
			if !f.PausedUntil.IsZero() {
				out[i].PausedUntil = &f.PausedUntil
			}
		}
	}
	circuits(ctx, cfg, out)
	return out, nil
}

// circuits fills in each endpoint's breaker state when REDIS_URL is set.
func circuits(ctx context.Context, cfg opsConfig, eps []endpointStatus) {
	if cfg.RedisURL == "" || len(eps) == 0 {
		return
	}
	g, closeGates, err := opsGates(cfg)
	if err != nil {
		return
	}
	defer closeGates()
	for i := range eps {
		if eps[i].url == "" {
			continue
		}
		st, err := g.State(ctx, eps[i].url)
		if err != nil {
			eps[i].Circuit = "unknown (redis unreachable)"
			continue
		}
		eps[i].Circuit = st.State
		if st.Failures > 0 {
			eps[i].Circuit += fmt.Sprintf(", %d failures", st.Failures)
		}
	}
}

// certExpiry is the CLIENT CERT column: "-" for none, else its expiry and
// the days left by now (or "EXPIRED").
func certExpiry(notAfter *time.Time, now time.Time) string {
	if notAfter == nil {
		return "-"
	}
	left := notAfter.Sub(now)
	if left <= 0 {
		return "EXPIRED " + notAfter.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("until %s (%d days)", notAfter.UTC().Format(time.RFC3339), int(left.Hours()/24))
}

// printEndpoints writes the endpoints' table, its texts through cell.
func printEndpoints(out io.Writer, eps []endpointStatus) {
	now := time.Now()
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ENDPOINT\tSTATE\tPENDING\tIN FLIGHT\tSCHEDULED\tWAITING FOR KEY\tBLOCKED KEYS\tDEAD LETTERS\tFLOW\tFILTER\tCIRCUIT\tCLIENT CERT"+
		"\tLAST ERROR")
	for _, e := range eps {
		state := "enabled"
		if !e.Enabled {
			state = "disabled: " + e.DisabledReason
		} else if e.SecretUnreadable != "" {
			state = "rows kept pending: a worker found " + e.SecretUnreadable + " (" + e.SecretUnreadableAt.UTC().Format(time.RFC3339) + ")"
		} else if e.PausedUntil != nil {
			state = "paused by its consumer until " + e.PausedUntil.UTC().Format(time.RFC3339)
		} else if e.FailingSince != nil {
			state = "failing since " + e.FailingSince.UTC().Format(time.RFC3339)
		}
		last := "-"
		if e.LastError != "" {
			last = e.LastError
			if e.LastErrorAt != nil {
				last += " (" + e.LastErrorAt.UTC().Format(time.RFC3339) + ")"
			}
		}
		circuit := e.Circuit
		if circuit == "" {
			circuit = "-"
		}
		blocked := "-"
		if e.BlockedKeys > 0 {
			blocked = fmt.Sprintf("%d (oldest %s)", e.BlockedKeys, secs(e.BlockedOldestSecs))
		}
		flow := "-"
		if e.Rate != "" || e.MaxInFlight > 0 {
			rate, inFlight := cmp.Or(e.Rate, "-"), "-"
			if e.MaxInFlight > 0 {
				inFlight = fmt.Sprint(e.MaxInFlight)
			}
			flow = "rate " + rate + ", in flight " + inFlight
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(e.Name), cell(state), e.Pending, e.InFlight, e.Scheduled,
			e.Waiting, blocked, e.DeadLetters, flow, filterText(e.Filter), cell(circuit), certExpiry(e.ClientCertNotAfter, now), cell(last))
	}
	_ = w.Flush()
}
