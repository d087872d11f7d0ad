package outbox

// ChartStatement is chart (queries/charts.sql) with pgx's named arguments.
func ChartStatement() string { return statements["chart"].named() }
