package outbox

// ClaimStatements are the claim's steps as written (queries/claim.sql), by
// name, in the order they run.
func ClaimStatements() [][2]string {
	var out [][2]string
	for _, name := range []string{"claim_queues", "claim_events", "claim_fan_out"} {
		out = append(out, [2]string{name, statements[name].text})
	}
	return out
}
