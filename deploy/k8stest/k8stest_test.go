// Package k8stest decodes the Kubernetes manifests of deploy/kubernetes
// strictly into the Kubernetes API types: a misspelt or misplaced field, or
// a value of the wrong type, fails. It is a module of its own so that the
// dibs module does not take the Kubernetes API as a dependency; make test
// runs it.
package k8stest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// docs splits a YAML file into its documents.
func docs(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range bytes.Split(raw, []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// objects are the manifests, decoded.
type objects struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	configMap  *corev1.ConfigMap
	secret     *corev1.Secret
	job        *batchv1.Job
	ingress    *networkingv1.Ingress
}

func decodeAll(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob("../kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var o objects
	for _, f := range files {
		for _, d := range docs(t, f) {
			var meta struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(d, &meta); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var dst any
			switch meta.Kind {
			case "Deployment":
				o.deployment = &appsv1.Deployment{}
				dst = o.deployment
			case "Service":
				o.service = &corev1.Service{}
				dst = o.service
			case "PodDisruptionBudget":
				o.pdb = &policyv1.PodDisruptionBudget{}
				dst = o.pdb
			case "ConfigMap":
				o.configMap = &corev1.ConfigMap{}
				dst = o.configMap
			case "Secret":
				o.secret = &corev1.Secret{}
				dst = o.secret
			case "Job":
				o.job = &batchv1.Job{}
				dst = o.job
			case "Ingress":
				o.ingress = &networkingv1.Ingress{}
				dst = o.ingress
			case "Kustomization":
				continue
			default:
				t.Fatalf("%s: a %q this test does not know", f, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(d, dst); err != nil {
				t.Errorf("%s: %s does not decode strictly: %v", f, meta.Kind, err)
			}
		}
	}
	return o
}

// TestManifestsDecodeStrictly: every manifest is a valid object of its
// kind, and the objects fit together: probes on /readyz and /healthz on the
// container's port, requests set, the configuration and secrets from the
// ConfigMap and Secret that are there, a non-root pod, a
// PodDisruptionBudget and Service that select the pods.
func TestManifestsDecodeStrictly(t *testing.T) {
	o := decodeAll(t)
	if o.deployment == nil || o.service == nil || o.pdb == nil || o.configMap == nil || o.secret == nil {
		t.Fatalf("missing objects: %+v", o)
	}
	pod := o.deployment.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if len(c.Ports) != 1 {
		t.Fatalf("want one port, got %v", c.Ports)
	}
	port := c.Ports[0]
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[name]
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want {
			t.Errorf("%s probe: want GET %s, got %+v", name, want, p)
			continue
		}
		if p.HTTPGet.Port.String() != port.Name && int32(p.HTTPGet.Port.IntValue()) != port.ContainerPort {
			t.Errorf("%s probe on port %s, the container's is %s/%d", name, p.HTTPGet.Port.String(), port.Name, port.ContainerPort)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests: %v", c.Resources.Requests)
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		t.Error("no terminationGracePeriodSeconds (deploy/deploy_test.go checks it against the drain)")
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the pod does not require a non-root user")
	}
	fromConfigMap, fromSecret := false, false
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil && e.ConfigMapRef.Name == o.configMap.Name {
			fromConfigMap = true
		}
		if e.SecretRef != nil && e.SecretRef.Name == o.secret.Name {
			fromSecret = true
		}
	}
	if !fromConfigMap || !fromSecret {
		t.Errorf("envFrom %+v: want the ConfigMap %q and the Secret %q", c.EnvFrom, o.configMap.Name, o.secret.Name)
	}
	for _, e := range c.Env {
		if strings.Contains(e.Name, "TOKEN") || strings.Contains(e.Name, "SECRET") {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s is set in the pod spec, not from the Secret", e.Name)
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name != o.configMap.Name {
			t.Errorf("volume %s mounts ConfigMap %s, which is not there", v.Name, v.ConfigMap.Name)
		}
	}
	if _, ok := o.configMap.Data["dibs.yaml"]; !ok {
		t.Error("the ConfigMap has no dibs.yaml")
	}
	labels := pod.Labels
	for k, v := range o.pdb.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%s; the pods carry %v", k, v, labels)
		}
	}
	if o.pdb.Spec.MaxUnavailable == nil && o.pdb.Spec.MinAvailable == nil {
		t.Error("the PodDisruptionBudget bounds nothing")
	}
	for k, v := range o.service.Spec.Selector {
		if labels[k] != v {
			t.Errorf("the Service selects %s=%s; the pods carry %v", k, v, labels)
		}
	}
	if tp := o.service.Spec.Ports[0].TargetPort; tp.String() != port.Name && int32(tp.IntValue()) != port.ContainerPort {
		t.Errorf("the Service targets %s, the container's port is %s/%d", tp.String(), port.Name, port.ContainerPort)
	}
	if o.job != nil && (len(o.job.Spec.Template.Spec.Containers) != 1 || o.job.Spec.Template.Spec.Containers[0].Args[0] != "migrate") {
		t.Errorf("the migration Job does not run dibs migrate")
	}
	if !versionedImage.MatchString(c.Image) {
		t.Errorf("the Deployment runs image %q: want a version tag (name:vX.Y.Z), never latest", c.Image)
	}
	if o.job != nil && o.job.Spec.Template.Spec.Containers[0].Image != c.Image {
		t.Errorf("the migration Job runs %q, the Deployment %q: one build migrates and serves", o.job.Spec.Template.Spec.Containers[0].Image, c.Image)
	}
	checkIngress(t, o)
}

// versionedImage is an image named with a version tag.
var versionedImage = regexp.MustCompile(`^[^:@]+(:[0-9]+)?/[^:@]+:v[0-9]+\.[0-9]+\.[0-9]+$`)

// checkIngress: the example Ingress routes to the Service's port and turns
// off what breaks dibs behind NGINX: response buffering (server-sent event
// streams) and the body size limit (grant uploads).
func checkIngress(t *testing.T, o objects) {
	t.Helper()
	in := o.ingress
	if in == nil {
		t.Fatal("no Ingress in deploy/kubernetes")
	}
	for k, v := range map[string]string{
		"nginx.ingress.kubernetes.io/proxy-buffering": "off",
		"nginx.ingress.kubernetes.io/proxy-body-size": "0",
	} {
		if in.Annotations[k] != v {
			t.Errorf("the Ingress sets %s to %q, want %q", k, in.Annotations[k], v)
		}
	}
	for _, r := range in.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			b := p.Backend.Service
			if b == nil || b.Name != o.service.Name || (b.Port.Name != o.service.Spec.Ports[0].Name && b.Port.Number != o.service.Spec.Ports[0].Port) {
				t.Errorf("the Ingress routes %s to %+v, not to the Service %s's port", p.Path, b, o.service.Name)
			}
		}
	}
}

// TestStrictDecodingCatchesMistakes: the decoding above does refuse a
// misspelt field, so the test means something.
func TestStrictDecodingCatchesMistakes(t *testing.T) {
	bad := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 3\n")
	if err := yaml.UnmarshalStrict(bad, &appsv1.Deployment{}); err == nil {
		t.Fatal("a misspelt field decoded")
	}
}

// TestSecretShipsNoValues: the Secret's values ship empty, never a
// placeholder a cluster could run on: dibs serve refuses an empty one at
// start, naming it, so an unfilled Secret is noticed at once.
func TestSecretShipsNoValues(t *testing.T) {
	o := decodeAll(t)
	if o.secret == nil {
		t.Fatal("no Secret")
	}
	if len(o.secret.StringData)+len(o.secret.Data) == 0 {
		t.Fatal("the Secret names no variable")
	}
	for k, v := range o.secret.StringData {
		if v != "" {
			t.Errorf("the Secret ships %s = %q: ship it empty", k, v)
		}
	}
	for k, v := range o.secret.Data {
		if len(v) != 0 {
			t.Errorf("the Secret ships %s with %d bytes: ship it empty", k, len(v))
		}
	}
}
