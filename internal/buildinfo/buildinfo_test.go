package buildinfo

import (
	"net/http/httptest"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestFromBuild(t *testing.T) {
	t.Parallel()
	settings := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		ok       bool
		override string
		want     Info
	}{
		{"no build info", nil, false, "", Info{Version: "devel", Revision: Unknown, Date: Unknown}},
		{"working tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "abc123", "vcs.time", "2025-01-02T03:04:05Z", "vcs.modified", "true")}, true, "",
			Info{Version: "devel", Revision: "abc123-dirty", Date: "2025-01-02T03:04:05Z", GoVersion: "go1.26.0"}},
		{"module version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.0"},
			Settings: settings("vcs.revision", "abc123", "vcs.modified", "false")}, true, "",
			Info{Version: "v1.4.0", Revision: "abc123", Date: Unknown, GoVersion: "go1.26.0"}},
		{"set at link time", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.0"}}, true, "v9.9.9",
			Info{Version: "v9.9.9", Revision: Unknown, Date: Unknown, GoVersion: "go1.26.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := fromBuild(tt.bi, tt.ok, tt.override)
			if tt.want.GoVersion == "" {
				tt.want.GoVersion = got.GoVersion // the running toolchain's
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStringAndCollector(t *testing.T) {
	t.Parallel()
	in := Info{Version: "v1.0.0", Revision: "abc", Date: "2025-01-02T03:04:05Z", GoVersion: "go1.26.0"}
	if s := in.String(); s != "dibs v1.0.0 (commit abc, built 2025-01-02T03:04:05Z, go1.26.0)" {
		t.Fatalf("String: %q", s)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector(in))
	want := `# HELP dibs_build_info Always 1; the labels tell the running build: version, revision (commit), date (commit time), goversion.
# TYPE dibs_build_info gauge
dibs_build_info{date="2025-01-02T03:04:05Z",goversion="go1.26.0",revision="abc",version="v1.0.0"} 1
`
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if got := rec.Body.String(); got != want {
		t.Fatalf("/metrics:\n%s\nwant:\n%s", got, want)
	}
}
