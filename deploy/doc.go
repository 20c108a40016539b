// Package deploy holds what runs the processor and what runs beside it in
// production:
//
//   - Dockerfile: the container image (targets processor, the default;
//     with-plugins, plus the example WebAssembly plugins; loadgen), built
//     from the repository's root with the Makefile's go build flags;
//   - compose.yaml: two instances on a one-node Apache Kafka with loadgen,
//     Prometheus (prometheus/prometheus.yml) and Grafana
//     (grafana/provisioning);
//   - k8s/: a kustomization with a StatefulSet, its Services, a
//     PodDisruptionBudget, a ServiceAccount, a NetworkPolicy, and a
//     ConfigMap and Secret from generators; components/monitoring
//     (PodMonitor, and a PrometheusRule made from the alerting rules),
//     components/keda (a ScaledObject on the processor's lag) and
//     components/state-volume (a claim per pod for PROCESSOR_STATE_DIR);
//   - helm/processor: the same deployment as a Helm chart, whose default
//     values render what k8s/ renders (the tests compare them);
//   - the Grafana dashboard (grafana/processor.json) and the Prometheus
//     alerting rules with their unit tests (prometheus/alerts.yml,
//     alerts_test.yml); docs/operations.md describes every metric they
//     use and has a runbook section for every alert.
//
// docs/deploy.md is the guide. The package has no code. Its tests check
// these files against the code: every PROCESSOR_* variable they set is
// one the processor reads (config.Vars() and the registered transforms'
// settings) and the values load; probe paths and ports are those the
// binary serves; the image's entrypoint and go build flags are those of
// make build; grace periods exceed the longest clean stop; the metric
// table of docs/operations.md matches the metrics the code registers and
// the dashboard and rules use only documented metrics; every alert has a
// runbook section and is tested; promtool accepts the rules and the
// Prometheus configuration; the kustomize base, its components and the
// Helm chart render (kustomize, helm) into objects that agree with each
// other and pass kubernetes-validate --strict. TestImageBinary builds cmd/processor with the
// Dockerfile's flags and runs it, standing in for an image build, which
// CI does not do. Without promtool (the Debian package prometheus) the
// promtool tests are skipped, and without helm, kustomize or
// kubernetes-validate (make deploy-tools installs them in deploy/.cache)
// the rendering tests, except under CI, where they fail.
package deploy
