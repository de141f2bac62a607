package service

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dibsio/dibs/httpapi"
)

// FuzzLoadConfig feeds arbitrary files to LoadFile, the loader of `dibs
// serve --config`. A bad file is an error, never a panic; a file that loads loads
// the same way twice; and the durations of its http section are the ones
// it wrote, not values wrapped around by an overflow.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		"stream:\n  batch_size: 10\n  block_ms: 200\n  reclaim_min_idle_ms: 1500\n",
		"http:\n  max_in_flight: 100\n  claim_timeout_ms: 2000\n  read_timeout_ms: 30000\n",
		"embedded_redis:\n  appendfsync: always\n", "embedded_redis:\n  appendfsync: sometimes\n",
		"waiting_room:\n  tick_ms: 1000\n  workers: 4\n", "addr: 127.0.0.1:0\nredis: redis://x\ndb: sqlite://x.db\n",
		"stream:\n  batch_sise: 10\n", "stream: [\n", "http:\n  claim_timeout_ms: -1\n", "---\n---\n", "!!binary x", "&a [*a]",
		"http:\n  claim_timeout_ms: 9223372036854\n", "stream: ~\nhttp: ~\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		path := filepath.Join(t.TempDir(), "dibs.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		fc, err := LoadFile(path)
		if err != nil {
			return
		}
		again, err := LoadFile(path)
		if err != nil || !reflect.DeepEqual(fc, again) {
			t.Fatalf("loaded %+v, then %+v, %v", fc, again, err)
		}
		var c httpapi.Config
		fc.HTTP.apply(&c)
		for _, d := range []struct {
			name string
			got  time.Duration
			n    int
			unit time.Duration
		}{
			{"claim_timeout_ms", c.ClaimTimeout, fc.HTTP.ClaimTimeoutMS, time.Millisecond},
			{"read_timeout_ms", c.ReadTimeout, fc.HTTP.ReadTimeoutMS, time.Millisecond},
			{"write_timeout_ms", c.WriteTimeout, fc.HTTP.WriteTimeoutMS, time.Millisecond},
			{"stream_idle_timeout_ms", c.StreamIdleTimeout, fc.HTTP.StreamIdleTimeoutMS, time.Millisecond},
			{"idempotency_ttl_seconds", c.IdempotencyTTL, fc.HTTP.IdempotencyTTLSeconds, time.Second},
		} {
			if d.got/d.unit != time.Duration(d.n) {
				t.Fatalf("http.%s: %d in the file, %v applied", d.name, d.n, d.got)
			}
		}
	})
}
