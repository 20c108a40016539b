// Package deploy holds what runs beside the processor in production: the
// Grafana dashboard (grafana/processor.json) and the Prometheus alerting
// rules with their unit tests (prometheus/alerts.yml, alerts_test.yml).
// docs/operations.md describes every metric they use and has a runbook
// section for every alert.
//
// The package has no code. Its tests check that the dashboard is well
// formed and its queries parse, that the dashboard and the rules use only
// metrics documented in docs/operations.md, that every alert has a runbook
// section and is tested, and that promtool accepts the rules and passes
// their unit tests. Without promtool (the Debian package prometheus) the
// promtool tests are skipped, except under CI, where they fail.
package deploy
