package outbox

// PlainOpen says whether s's next claim tries the plain path
// (PlainClaimSQL) first.
func PlainOpen(s *Store) bool { return s.plain.Load() }
