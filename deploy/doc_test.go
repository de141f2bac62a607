// Package deploy_test checks the deployment files in deploy/: the
// Dockerfile's build stage makes a static binary, the Kubernetes manifests
// name the real flags, ports, probe paths and drain time, the Grafana
// dashboard and the Prometheus alert rules query only metrics dibs exports,
// and the rules pass promtool. The manifests' strict decoding into the
// Kubernetes API types is in the deploy/k8stest module.
package deploy_test
