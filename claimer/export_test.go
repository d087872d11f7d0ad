package claimer

// The statements, for the plan tests.
const (
	ClaimSQL  = claimSQL
	RecordSQL = recordSQL
)
