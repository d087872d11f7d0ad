package claimer

// ClaimSQL is the claim statement, for the plan test.
const ClaimSQL = claimSQL
