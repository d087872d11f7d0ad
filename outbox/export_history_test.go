package outbox

// NamedStatement is the statement name of queries/ with pgx's named
// arguments.
func NamedStatement(name string) string { return statements[name].named() }
