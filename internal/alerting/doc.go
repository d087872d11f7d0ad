// Package alerting holds the tests that keep the monitoring files under
// deploy/ true to the worker: deploy/prometheus/alerts.yml passes
// `promtool check rules` and its unit tests (alerts_test.yml), every
// expression of the rules and of deploy/grafana/dashboard.json names only
// metrics the worker's code registers (a renamed metric breaks the
// test), and every alert carries a severity, a summary, a description and
// a runbook link to a heading of docs/monitoring.md that exists.
package alerting
