package service

import (
	"os"
	"path/filepath"
	"regexp"
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
	doc, err := os.ReadFile("../../../docs/tuning.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	if !ok {
		t.Fatal("no yaml block in docs/tuning.md")
	}
	block, _, _ := strings.Cut(rest, "```")
	fc, err := loadYAML(t, block)
	if err != nil {
		t.Fatalf("docs/tuning.md example does not load: %v", err)
	}
	def := DefaultConfig()
	got, want := fc.Stream, def.Stream
	got.Logger, want.Logger = nil, nil
	if got.BatchSize != want.BatchSize || got.BatchWait != want.BatchWait || got.Block != want.Block || got.ReclaimMinIdle != want.ReclaimMinIdle ||
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
			if _, err := loadYAML(t, body); err == nil {
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

// TestConfigErrorsNameTheKey: a bad value or a bad type in the file is
// reported by its dotted YAML key and the line, in one style, never with a
// Go field or type name.
func TestConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, want string
	}{
		{"stream value", "stream:\n  batch_size: -1\n", "stream.batch_size must be at least 1, got -1"},
		{"stream duration", "stream:\n  block_ms: -5\n", "stream.block_ms must be at least 1ms, got -5ms"},
		{"stream pair", "stream:\n  min_consumers_per_instance: 4\n  max_consumers_per_instance: 2\n",
			"stream.max_consumers_per_instance (2) must be at least stream.min_consumers_per_instance (4)"},
		{"stream handler deadline", "stream:\n  reclaim_min_idle_ms: 1000\n  handler_timeout_ms: 900\n",
			"stream.handler_timeout_ms must be positive and under half of stream.reclaim_min_idle_ms (1s), got 900ms"},
		{"stream read mode", "stream:\n  read_mode: sometimes\n", `stream.read_mode must be "block" or "poll", got "sometimes"`},
		{"stream unknown key", "stream:\n  batch_sise: 10\n", "line 2: stream.batch_sise: unknown key"},
		{"stream type", "stream:\n  batch_size: ten\n", `line 2: stream.batch_size: want a whole number, got "ten"`},
		{"stream list", "stream:\n  read_mode: [block]\n", "line 2: stream.read_mode: want block or poll, got a list"},
		{"http type", "http:\n  max_conns: many\n", `line 2: http.max_conns: want a whole number, got "many"`},
		{"http unknown key", "http:\n  max_con: 5\n", "line 2: http.max_con: unknown key"},
		{"section type", "http: 5\n", `line 1: http: want a mapping, got "5"`},
		{"duration type", "promotions:\n  retention: a week\n", `line 2: promotions.retention: want a duration such as 30s, 15m or 168h, got "a week"`},
		{"issue value", "issue:\n  voucher_valid_days: -1\n", "issue.voucher_valid_days must be 1 to"},
		{"issue nested", "issue:\n  codes:\n    alphabet: A\n", "issue.codes.alphabet must have 2 to 128 characters"},
		{"issue webhook", "issue:\n  webhook:\n    concurrency: 100\n", "issue.webhook.concurrency must be 1 to 64"},
		{"bool type", "http:\n  access_log: loud\n", `line 2: http.access_log: want true or false, got "loud"`},
	}
	goish := regexp.MustCompile(`\b(?:[A-Z][a-z]+){2,}\b|\b(?:int|int64|bool|string|time\.Duration|service\.[A-Z]\w*|stream\.[A-Z]\w*)\b|!!`)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "dibs.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(path)
			if err == nil {
				t.Fatal("want an error")
			}
			msg := strings.TrimPrefix(err.Error(), "config "+path+": ")
			if !strings.Contains(msg, tt.want) {
				t.Fatalf("got %q, want %q in it", msg, tt.want)
			}
			if m := goish.FindString(msg); m != "" {
				t.Errorf("%q shows a Go name or type: %q", msg, m)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("%q is not one line", msg)
			}
		})
	}
}

// loadYAML writes body to a configuration file of the test's own and loads
// it with LoadFile.
func loadYAML(t *testing.T, body string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dibs.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadFile(path)
}
