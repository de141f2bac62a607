// Package buildinfo tells which build of dibs is running: its version,
// the commit it was built from and when that commit was made, read from the
// module's build information (go version -m shows the same), for
// dibs --version and the dibs_build_info metric.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// version overrides the module version when set at link time:
// go build -ldflags "-X github.com/dibsio/dibs/internal/buildinfo.version=v1.2.3".
var version string

// Unknown stands for a part of the build information the binary does not
// carry (a build outside a git checkout has no commit).
const Unknown = "unknown"

// Info describes one build.
type Info struct {
	// Version is the module version ("v1.2.3"), the one set at link time,
	// or "devel" for a build of a working tree.
	Version string
	// Revision is the commit the binary was built from, with "-dirty"
	// when the tree had changes, or Unknown.
	Revision string
	// Date is the commit's time (RFC 3339, UTC), or Unknown.
	Date string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Get returns the running binary's build information.
var Get = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuild(bi, ok, version)
})

// fromBuild reads Info from the build information bi (ok false: none),
// with override, if set, as the version.
func fromBuild(bi *debug.BuildInfo, ok bool, override string) Info {
	in := Info{Version: "devel", Revision: Unknown, Date: Unknown, GoVersion: runtime.Version()}
	if ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.time":
				in.Date = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && in.Revision != Unknown {
			in.Revision += "-dirty"
		}
	}
	if override != "" {
		in.Version = override
	}
	return in
}

// String is the one-line form dibs --version prints:
// "dibs v1.2.3 (commit 0123abc…, built 2024-05-01T10:00:00Z, go1.26.0)".
func (in Info) String() string {
	var b strings.Builder
	b.WriteString("dibs " + in.Version)
	b.WriteString(" (commit " + in.Revision + ", built " + in.Date + ", " + in.GoVersion + ")")
	return b.String()
}

// Collector returns the dibs_build_info gauge: always 1, its labels the
// build's version, revision, date and Go version, so a dashboard can show
// which build each instance runs.
func Collector(in Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dibs_build_info",
		Help: "Always 1; the labels tell the running build: version, revision (commit), date (commit time), goversion.",
		ConstLabels: prometheus.Labels{
			"version": in.Version, "revision": in.Revision, "date": in.Date, "goversion": in.GoVersion,
		},
	})
	g.Set(1)
	return g
}
