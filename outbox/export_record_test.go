package outbox

// RecordSQL and RecordFanSQL are the record's statements as written (with
// their @parameters), for the plan tests.
var (
	RecordSQL    = statements["record"].named()
	RecordFanSQL = statements["record_fan"].named()
)
