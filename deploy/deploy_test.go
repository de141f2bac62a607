package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/dibsio/dibs/internal/assembly/service"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/stream"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// repoRoot is the module's root, the Docker build context.
const repoRoot = ".."

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// dibsBinary builds cmd/dibs once for the tests of this package.
func dibsBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dibs-deploy-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "dibs")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/dibs").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// yamlDocs decodes every document of a YAML file into generic maps.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if err == io.EOF {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, d)
	}
}

// dig walks a decoded YAML or JSON value by map keys and list indices.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// --- Dockerfile ---

// dockerfile is the parts of deploy/Dockerfile the tests look at.
type dockerfile struct {
	args     map[string]string // ARG defaults
	froms    []string          // images of the stages, in order
	buildRun string            // the RUN line with go build
	user     string            // the final stage's USER
	runs     []string
}

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{args: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			d.args[k] = v
		case "FROM":
			d.froms = append(d.froms, strings.Fields(rest)[0])
			d.user = ""
		case "USER":
			d.user = rest
		case "RUN":
			d.runs = append(d.runs, rest)
			if strings.Contains(rest, "go build") {
				d.buildRun = rest
			}
		}
	}
	return d
}

// TestDockerfileShape: two stages, the last distroless static (or
// scratch) running as a non-root user, and no redis-server in the image.
func TestDockerfileShape(t *testing.T) {
	t.Parallel()
	d := parseDockerfile(t)
	if len(d.froms) < 2 {
		t.Fatalf("want a multi-stage build, got stages %v", d.froms)
	}
	final := d.froms[len(d.froms)-1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage %s: want distroless static or scratch", final)
	}
	if u, _, _ := strings.Cut(d.user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("final stage runs as %q, want a non-root user", d.user)
	}
	for _, r := range d.runs {
		if strings.Contains(r, "redis") {
			t.Errorf("the image installs Redis (%s): it must need --redis", r)
		}
	}
	if !strings.Contains(d.buildRun, "CGO_ENABLED=0") {
		t.Errorf("the build line does not set CGO_ENABLED=0: %s", d.buildRun)
	}
}

// TestDockerfileBuildsStaticBinary runs the Dockerfile's own go build line
// (there is no container runtime here) and checks what it makes: a
// statically linked binary built with CGO_ENABLED=0 that carries the
// version given at build time, and that, lacking a redis-server, refuses
// to start without --redis and says so.
func TestDockerfileBuildsStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dibs from scratch")
	}
	t.Parallel()
	d := parseDockerfile(t)
	out := filepath.Join(t.TempDir(), "dibs")
	cmd := d.buildRun
	for k, v := range d.args {
		if k == "VERSION" {
			v = "v9.8.7-test"
		}
		cmd = strings.ReplaceAll(cmd, "${"+k+"}", v)
	}
	const dst = "-o /out/dibs"
	if !strings.Contains(cmd, dst) {
		t.Fatalf("the build line does not write %s: %s", dst, cmd)
	}
	cmd = strings.Replace(cmd, dst, "-o "+out, 1)
	build := exec.Command("sh", "-c", cmd)
	build.Dir = repoRoot
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	info, err := exec.Command("go", "version", "-m", out).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, info)
	}
	// With -trimpath Go leaves -ldflags out of the build information; the
	// version it set shows in dibs --version below.
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath=true"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("go version -m lacks %s:\n%s", want, info)
		}
	}
	kind, err := exec.Command("file", out).CombinedOutput()
	if err != nil {
		t.Fatalf("file: %v\n%s", err, kind)
	}
	if !strings.Contains(string(kind), "statically linked") {
		t.Errorf("not a static binary: %s", kind)
	}
	v, err := exec.Command(out, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "dibs v9.8.7-test (commit ") {
		t.Errorf("dibs --version: %v %s", err, v)
	}
	dir := t.TempDir()
	serve := exec.Command(out, "serve", "--addr", "127.0.0.1:0", "--db", "sqlite://"+filepath.Join(dir, "dibs.db"),
		"--data-dir", filepath.Join(dir, "data"))
	serve.Env = []string{"PATH=" + dir, "DIBS_ADMIN_TOKEN=t"} // as in the image: no redis-server anywhere
	b, err := serve.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "redis-server is not installed") || !strings.Contains(string(b), "--redis") {
		t.Errorf("serve without --redis and without redis-server: want a refusal naming --redis, got %v\n%s", err, b)
	}
}

// --- Kubernetes manifests ---

// manifests returns the Kubernetes objects of deploy/kubernetes by kind.
func manifests(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	byKind := map[string]map[string]any{}
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			if k, _ := d["kind"].(string); k != "" && k != "Kustomization" {
				byKind[k] = d
			}
		}
	}
	return byKind
}

// serveHelp is the flags and environment variables dibs serve --help lists.
func serveHelp(t *testing.T) (flags, env map[string]bool) {
	t.Helper()
	out, err := exec.Command(dibsBinary(t), "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("dibs serve --help: %v\n%s", err, out)
	}
	flags, env = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  (--[a-z-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\[(DIBS_[A-Z_]+)\]`).FindAllStringSubmatch(string(out), -1) {
		env[m[1]] = true
	}
	return flags, env
}

// documentedEnv is the environment variables of docs/operations.md's
// "Flags and environment" table.
func documentedEnv(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "| flag | env | default | |")
	table, _, _ = strings.Cut(table, "\n\n")
	env := map[string]bool{}
	for _, m := range regexp.MustCompile("`(DIBS_[A-Z_]+)`").FindAllStringSubmatch(table, -1) {
		env[m[1]] = true
	}
	return env
}

// TestManifestsNameRealFlags: the Deployment runs dibs serve with flags it
// has, on the port its probes and Service use, with the probe paths dibs
// serves, environment variables dibs reads, a termination grace period that
// covers dibs's drain, and a ConfigMap whose dibs.yaml loads.
func TestManifestsNameRealFlags(t *testing.T) {
	t.Parallel()
	objs := manifests(t)
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret"} {
		if objs[kind] == nil {
			t.Fatalf("no %s in deploy/kubernetes", kind)
		}
	}
	flags, helpEnv := serveHelp(t)
	docEnv := documentedEnv(t)
	pod := dig(objs["Deployment"], "spec", "template", "spec")
	c := dig(pod, "containers", 0)

	args, _ := dig(c, "args").([]any)
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("container args %v: want dibs serve", args)
	}
	addr := ""
	for i, a := range args {
		s := fmt.Sprint(a)
		if !strings.HasPrefix(s, "--") {
			continue
		}
		name, _, _ := strings.Cut(s, "=")
		if !flags[name] {
			t.Errorf("args name %s, which dibs serve does not have (it has %v)", name, flags)
		}
		if name == "--addr" && i+1 < len(args) {
			addr = fmt.Sprint(args[i+1])
		}
		if name == "--admin-token" {
			t.Errorf("the admin token is passed as a flag, which ps shows; use DIBS_ADMIN_TOKEN")
		}
	}
	if !strings.HasPrefix(addr, "0.0.0.0:") {
		t.Errorf("--addr %q: a pod must listen beyond loopback", addr)
	}
	port := strings.TrimPrefix(addr, "0.0.0.0:")
	if got := fmt.Sprint(dig(c, "ports", 0, "containerPort")); got != port {
		t.Errorf("containerPort %s, but dibs listens on %s", got, port)
	}
	portName := fmt.Sprint(dig(c, "ports", 0, "name"))
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if got := dig(c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path %v, want %s", probe, got, path)
		}
		if got := fmt.Sprint(dig(c, probe, "httpGet", "port")); got != portName && got != port {
			t.Errorf("%s port %s, want %s", probe, got, portName)
		}
	}
	if got := fmt.Sprint(dig(objs["Service"], "spec", "ports", 0, "targetPort")); got != portName && got != port {
		t.Errorf("Service targetPort %s, want %s", got, portName)
	}
	for _, r := range []string{"cpu", "memory"} {
		if dig(c, "resources", "requests", r) == nil {
			t.Errorf("no %s request", r)
		}
	}

	// Every variable the manifests set is one dibs reads.
	var names []string
	for _, e := range dig(c, "env").([]any) {
		names = append(names, fmt.Sprint(dig(e, "name")))
	}
	for _, kind := range []string{"ConfigMap", "Secret"} {
		for _, field := range []string{"data", "stringData"} {
			m, _ := dig(objs[kind], field).(map[string]any)
			for k := range m {
				if strings.HasPrefix(k, "DIBS_") {
					names = append(names, k)
				}
			}
		}
	}
	for _, n := range names {
		if !helpEnv[n] && !docEnv[n] {
			t.Errorf("the manifests set %s, which dibs does not read", n)
		}
	}
	if secret, _ := dig(objs["Secret"], "stringData").(map[string]any); secret["DIBS_ADMIN_TOKEN"] == nil || secret["DIBS_REDIS_URL"] == nil {
		t.Errorf("the Secret lacks DIBS_ADMIN_TOKEN or DIBS_REDIS_URL (the image has no redis-server)")
	}

	// The grace period covers the drain, and not by much more.
	grace := time.Duration(dig(pod, "terminationGracePeriodSeconds").(int)) * time.Second
	preStop := time.Duration(0)
	if s, ok := dig(c, "lifecycle", "preStop", "sleep", "seconds").(int); ok {
		preStop = time.Duration(s) * time.Second
	}
	drain := preStop + service.DrainTimeout + service.SchedulerStopTimeout + service.ConsumersStopTimeout
	if grace < drain || grace > drain+30*time.Second {
		t.Errorf("terminationGracePeriodSeconds %s: want the drain, %s, plus at most 30s", grace, drain)
	}

	// The PodDisruptionBudget selects the Deployment's pods.
	sel := dig(objs["PodDisruptionBudget"], "spec", "selector", "matchLabels").(map[string]any)
	labels := dig(objs["Deployment"], "spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%v, the pods are labelled %v", k, v, labels)
		}
	}

	// The ConfigMap's dibs.yaml loads, with the Secret's environment.
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dibs.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprint(dig(objs["ConfigMap"], "data", "dibs.yaml"))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", `"$0" serve --config "$1" --redis http://invalid 2>&1`, dibsBinary(t), cfgPath).CombinedOutput()
	if !strings.Contains(string(out), "--redis: unsupported scheme") {
		// The file loaded (the bad --redis is refused after it): anything
		// else names what in the file is wrong.
		t.Errorf("the ConfigMap's dibs.yaml does not load: %v\n%s", err, out)
	}
}

// TestSecretShipsEmpty: the Secret ships every value empty, and dibs serve
// refuses each as it is, naming the variable, so an unfilled Secret stops
// the pods at start rather than run them on made-up or well-known
// secrets; a waiting-room secret made as the Secret's comment says loads
// with the ConfigMap's dibs.yaml.
func TestSecretShipsEmpty(t *testing.T) {
	t.Parallel()
	objs := manifests(t)
	secret, _ := dig(objs["Secret"], "stringData").(map[string]any)
	if len(secret) == 0 {
		t.Fatal("the Secret has no stringData")
	}
	cfgPath := filepath.Join(t.TempDir(), "dibs.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprint(dig(objs["ConfigMap"], "data", "dibs.yaml"))), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := func(env ...string) string {
		cmd := exec.Command(dibsBinary(t), "serve", "--config", cfgPath, "--redis", "http://invalid")
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	for k, v := range secret {
		if v != "" {
			t.Errorf("the Secret ships %s with a value (%q): ship it empty", k, v)
		}
		if out := serve(k + "=" + fmt.Sprint(v)); !strings.Contains(out, k+" is set but empty") {
			t.Errorf("dibs serve with the Secret's %s as shipped does not refuse it:\n%s", k, out)
		}
	}
	if out := serve("DIBS_WAITROOM_SECRET=k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="); !strings.Contains(out, "--redis: unsupported scheme") {
		t.Errorf("a filled DIBS_WAITROOM_SECRET is refused:\n%s", out)
	}
}

// --- Dashboard and alert rules ---

var metricName = regexp.MustCompile(`\bdibs_[a-z0-9_]+`)

// queriedMetrics returns the dibs_ metrics the dashboard's panels and
// variables query, and those of the alert rules, by where they are used.
func queriedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("grafana/dibs.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana/dibs.json does not parse: %v", err)
	}
	used := map[string][]string{}
	add := func(where, expr string) {
		for _, m := range metricName.FindAllString(expr, -1) {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if base, ok := strings.CutSuffix(m, suffix); ok && strings.HasSuffix(base, "_seconds") {
					m = base
				}
			}
			used[m] = append(used[m], where)
		}
	}
	panels := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		panels++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			if !metricName.MatchString(tg.Expr) {
				t.Errorf("panel %q: %q queries no dibs metric", p.Title, tg.Expr)
			}
			add("panel "+p.Title, tg.Expr)
		}
	}
	if panels < 10 {
		t.Errorf("the dashboard has %d panels", panels)
	}
	for _, v := range dash.Templating.List {
		add("variable "+v.Name, v.Definition)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	rraw, err := os.ReadFile("prometheus/dibs-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rraw, &rules); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			add("alert "+r.Alert, r.Expr)
		}
	}
	// The alerts the deployment promises.
	for _, a := range []string{"DibsDeadLetters", "DibsIssueLag", "DibsConsumerErrors", "DibsRedisErrors", "DibsRedisDatabaseDrift", "DibsShedRequests"} {
		if !alerts[a] {
			t.Errorf("no alert %s in prometheus/dibs-alerts.yaml", a)
		}
	}
	return used
}

// TestAlertRulesPassPromtool: promtool (Debian's prometheus package,
// installed by scripts/deps.sh) accepts the rules. Missing promtool fails
// the test, except with -short.
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool is not installed (scripts/deps.sh installs it)")
		}
		t.Fatal("promtool is not installed: run scripts/deps.sh (apt-get install prometheus)")
	}
	out, err := exec.Command(promtool, "check", "rules", "prometheus/dibs-alerts.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestAlertRulesUnitTests: the rules fire, and stay quiet, as
// prometheus/dibs-alerts.test.yaml says (`promtool test rules`): clients
// that hang up fire nothing, and do not hide real 5xx. Missing promtool
// fails the test, except with -short.
func TestAlertRulesUnitTests(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool is not installed (scripts/deps.sh installs it)")
		}
		t.Fatal("promtool is not installed: run scripts/deps.sh (apt-get install prometheus)")
	}
	out, err := exec.Command(promtool, "test", "rules", "prometheus/dibs-alerts.test.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// deadLetterCount is a fixed count of unhandled dead letters.
type deadLetterCount map[string]int64

func (c deadLetterCount) UnhandledDeadLetters(context.Context) (map[string]int64, error) {
	return c, nil
}

// exportedMetrics returns the dibs_ metric names in an exposition.
func exportedMetrics(text string) map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (dibs_[a-z0-9_]+) `).FindAllStringSubmatch(text, -1) {
		names[m[1]] = true
	}
	return names
}

// TestDashboardAndAlertsQueryExportedMetrics: every metric the dashboard
// and the alert rules query is in /metrics of a running dibs that confirmed
// a claim. Series that appear only when something goes wrong (a dead
// letter, a failure, claims Redis lost) come from the same constructors the
// service registers, with every hook fired.
func TestDashboardAndAlertsQueryExportedMetrics(t *testing.T) {
	t.Parallel()
	used := queriedMetrics(t)

	cfg := service.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Redis = "redis://" + redistest.Single(t).Addr()
	cfg.DB = "sqlite://" + filepath.Join(t.TempDir(), "dibs.db")
	cfg.AdminToken = "t"
	cfg.Instance = "deploy-test"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	// A short reclaim pass samples the stream's lag soon.
	cfg.Stream.ReclaimMinIdle = 600 * time.Millisecond
	cfg.Stream.ReclaimInterval = 0
	cfg.Stream.HandlerTimeout = 0
	s, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	base := "http://" + s.Addr().String()
	post := func(path, body string) int {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/v1/promotions", `{"id":"dash","stock":5}`); code != http.StatusCreated {
		t.Fatalf("create promotion: %d", code)
	}
	if code := post("/v1/promotions/dash/claims", `{"user_id":"u1"}`); code != http.StatusAccepted {
		t.Fatalf("claim: %d", code)
	}
	// A waiting room, for the dibs_waitroom_* series of its row.
	if code := post("/v1/promotions", `{"id":"room","stock":5,"waiting_room":{"enabled":true}}`); code != http.StatusCreated {
		t.Fatalf("create promotion with a waiting room: %d", code)
	}
	var text string
	wait.For(t, 30*time.Second, "the claim issued and the stream's lag sampled", func() bool {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(b)
		return strings.Contains(text, "dibs_issued_total 1") && strings.Contains(text, `dibs_stream_lag{promotion="dash"}`) &&
			strings.Contains(text, `dibs_pending_claims{promotion="dash"}`) &&
			strings.Contains(text, `dibs_waitroom_waiting{promotion="room"}`)
	})
	exported := exportedMetrics(text)

	// The series that only a failure makes, from the constructors the
	// service uses, every hook fired once.
	reg := prometheus.NewRegistry()
	pm := promotion.NewMetrics(reg, "")
	pm.Requeued("p", 1)
	pm.Halted("p", true)
	pm.CountDeadLetters(deadLetterCount{"p": 1})
	h := pm.StreamHooks()
	h.Failure("dibs:{p}:claims", stream.FailureRedis)
	h.DeadLetter("dibs:{p}:claims", "x")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		exported[f.GetName()] = true
	}

	var names []string
	for name := range used {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !exported[name] {
			t.Errorf("%s (used by %s) is not a metric dibs exports", name, strings.Join(used[name], ", "))
		}
	}
}
