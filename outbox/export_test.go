package outbox

// PlainOpen says whether s's next claim tries the plain path
// (claim_plain) first.
func PlainOpen(s *Store) bool { return s.plain.Load() }

// PlainClaimStatement is claim_plain with pgx's named arguments.
func PlainClaimStatement() string { return statements["claim_plain"].named() }

// ClaimStatements are the claim's steps (queries/claim.sql), by name, in
// the order they run, with pgx's named arguments.
func ClaimStatements() [][2]string {
	var out [][2]string
	for _, name := range claimStepNames {
		out = append(out, [2]string{name, statements[name].named()})
	}
	return out
}

// Statements are every statement of queries/ as the files write them, by
// name.
func Statements() map[string]string {
	out := map[string]string{}
	for name, p := range statements {
		out[name] = p.text
	}
	return out
}

// PsqlVar finds the statements' parameters as the files write them.
var PsqlVar = psqlVar

// QueuesLeftOut says whether s's next claim leaves out the queues' step
// (claim_queues).
func QueuesLeftOut(s *Store) bool { return s.noQueues.Load() }

// NextSteps names the steps s's next claim runs (unless the plain path
// is open).
func NextSteps(s *Store) []string {
	steps, _ := s.nextSteps()
	var out []string
	for _, st := range steps {
		for i, c := range claimSteps {
			if st.sql == c.sql {
				out = append(out, claimStepNames[i])
			}
		}
	}
	return out
}

// claimStepNames are the names of claimSteps, in their order.
var claimStepNames = []string{"claim_queues", "claim_events", "claim_fan_out"}
