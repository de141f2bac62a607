package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
)

// TestTuningDocLoads keeps docs/tuning.md honest: its YAML example, with
// every key, must load, and its values must be the defaults.
func TestTuningDocLoads(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/tuning.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	if !ok {
		t.Fatal("no yaml block in docs/tuning.md")
	}
	block, _, _ := strings.Cut(rest, "```")
	path := filepath.Join(t.TempDir(), "dibs.yaml")
	if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	fc, err := LoadFile(path)
	if err != nil {
		t.Fatalf("docs/tuning.md example does not load: %v", err)
	}
	def := DefaultConfig()
	got, want := fc.Stream, def.Stream
	got.Logger, want.Logger = nil, nil
	if got.BatchSize != want.BatchSize || got.Block != want.Block || got.ReclaimMinIdle != want.ReclaimMinIdle ||
		got.MaxConsumers != want.MaxConsumers || got.HandlerTimeout != 12*time.Second || got.LeaseTTL != want.LeaseTTL {
		t.Fatalf("documented values differ from the defaults:\n got %+v\nwant %+v", got, want)
	}
	if fc.HTTP.MaxInFlight != 4096 || fc.EmbeddedRedis.AppendFsync != "everysec" {
		t.Fatalf("http/embedded_redis: %+v %+v", fc.HTTP, fc.EmbeddedRedis)
	}
	if fc.Promotions.Retention != promotion.DefaultRetention {
		t.Fatalf("promotions.retention = %s, want the default %s", fc.Promotions.Retention, promotion.DefaultRetention)
	}
	if got, want := fc.Issue, (issue.Config{}).WithDefaults(); got != want {
		t.Fatalf("issue: %+v, want the defaults %+v", got, want)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"unknown key":     "stream:\n  batch_sise: 10\n",
		"bad appendfsync": "embedded_redis:\n  appendfsync: sometimes\n",
		"not yaml":        "stream: [\n",
		"short codes":     "issue:\n  codes:\n    length: 5\n",
		"small alphabet":  "issue:\n  codes:\n    alphabet: AB\n",
		"repeated char":   "issue:\n  codes:\n    alphabet: ABCA\n",
		"voucher days":    "issue:\n  voucher_valid_days: -1\n",
		"short retention": "promotions:\n  retention: 10s\n",
		"bad retention":   "promotions:\n  retention: a week\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dibs.yaml")
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadFile(path); err == nil {
				t.Fatal("want an error")
			}
		})
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file: want an error")
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	_ = os.WriteFile(empty, nil, 0o644)
	if _, err := LoadFile(empty); err != nil {
		t.Fatalf("empty file: %v", err)
	}
}

func TestRedisOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    string
		addrs int
		bad   bool
	}{
		{"", 0, false},
		{"redis://127.0.0.1:6379/0", 1, false},
		{"127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002", 3, false},
		{"http://x", 0, true},
		{"not-an-address", 0, true},
	} {
		addrs, _, err := redisOptions(c.in)
		if (err != nil) != c.bad || len(addrs) != c.addrs {
			t.Errorf("%q: %v %v", c.in, addrs, err)
		}
	}
}
