package endpoints

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/fluxora/webhook-worker/signingkey"
	"github.com/fluxora/webhook-worker/webhook"
)

// FieldError says why a value given to Add or Update is refused. Field is
// the name of the value as the command line spells it (name, url, events,
// secret, retry-rps, reason); Problem never quotes a URL or a secret.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// nameRE is webhook_endpoints_name_valid: the name travels in a header and a
// metric label.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validateName refuses what the table refuses, and DefaultName in any case
// (it would be confused with the WEBHOOK_URL endpoint in logs, metrics and
// `worker dlq --endpoint default`).
func validateName(name string) error {
	if strings.EqualFold(name, DefaultName) {
		return invalid("name", "%q is reserved for the WEBHOOK_URL endpoint of the environment", name)
	}
	if !nameRE.MatchString(name) {
		return invalid("name", `%q: must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit`, name)
	}
	return nil
}

// normalizeEvents checks each subscribed type against the rule of
// webhook_outbox.event_type and drops duplicates. Nil or empty: every type,
// and so is "*" alone. An entry ending in "*" is a pattern (every type
// starting with what precedes it); a "*" anywhere else is refused.
func normalizeEvents(events []string) ([]string, error) {
	if len(events) == 1 && events[0] == "*" {
		return []string{}, nil
	}
	out := make([]string, 0, len(events))
	seen := make(map[string]bool, len(events))
	for _, t := range events {
		if t == "" || len(t) > 255 || strings.IndexFunc(t, unicode.IsControl) >= 0 {
			return nil, invalid("events", "%q: each type must be 1-255 bytes without control characters", t)
		}
		if t == "*" {
			return nil, invalid("events", `"*" (every type) cannot be combined with other types`)
		}
		if strings.Contains(strings.TrimSuffix(t, "*"), "*") {
			return nil, invalid("events", `%q: "*" may only end a type, as a pattern ("invoice.*")`, t)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

func validateSecret(secret string) error {
	if secret == "" {
		return invalid("secret", "must not be empty")
	}
	if err := signingkey.Check(secret); err != nil {
		return invalid("secret", "%v", err) // never quotes the secret
	}
	return nil
}

// RetryRPSMax is the largest retry rate an endpoint may have, per second
// (the CLI's and WEBHOOK_RETRY_RPS's bound too).
const RetryRPSMax = 1_000_000

func validateRetryRPS(n int) error {
	if n < 0 || n > RetryRPSMax {
		return invalid("retry-rps", "must be from 1 to 1000000 (0: WEBHOOK_RETRY_RPS applies)")
	}
	return nil
}

// validateOrdering: webhook.OrderingMoveOn or OrderingHold ("" too when
// empty is allowed: the default).
func validateOrdering(mode string, empty bool) error {
	if mode == webhook.OrderingMoveOn || mode == webhook.OrderingHold || (empty && mode == "") {
		return nil
	}
	return invalid("ordering", "must be move-on or hold")
}
