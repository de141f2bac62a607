// Package deploy holds what running dibs in production takes besides the
// binary: the Dockerfile, the Kubernetes manifests (kubernetes/), the
// Prometheus alert rules (prometheus/) and the Grafana dashboard (grafana/).
// It has no code; its tests keep the files in step with the code: the flags,
// ports and probe paths the manifests name, the metrics the dashboard and
// the alerts query, and the runbook each alert links to.
package deploy
