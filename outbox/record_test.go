package outbox

import (
	"strings"
	"testing"
)

// record_fan is record with the steps of fan-outs in flight added. The
// steps they share are written out in both (ARCHITECTURE.md, "The
// record"), and must not drift apart.
func TestRecordFanSharesRecordSteps(t *testing.T) {
	t.Parallel()
	own, fan := statements["record"].text, statements["record_fan"].text
	for _, step := range []string{"released", "deferred", "marked", "tried", "requeued", "dead", "health", "endpoints"} {
		if a, b := withStep(own, step), withStep(fan, step); a == "" || a != b {
			t.Errorf("step %s of record:\n%s\nof record_fan:\n%s", step, a, b)
		}
	}
}

// withStep is the body of the step name of a WITH statement ("" without
// one): its lines after "), name AS (" up to the next ")" that begins a
// line.
func withStep(sql, name string) string {
	_, rest, ok := strings.Cut(sql, "), "+name+" AS (\n")
	if !ok {
		return ""
	}
	body, _, _ := strings.Cut(rest, "\n)")
	return body
}
