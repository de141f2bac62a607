package stream

import (
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// FuzzConfigYAML feeds arbitrary YAML to the `stream:` section decoder. It
// never panics; and a configuration that decodes and validates holds the
// durations the YAML wrote, not values wrapped around by an overflow.
func FuzzConfigYAML(f *testing.F) {
	for _, s := range []string{
		"batch_size: 10\nread_mode: block\nblock_ms: 2000\n", "batch_wait_ms: 5\n", "batch_wait_ms: -1\n",
		"read_mode: poll\npoll_interval_ms: 100\nidle_timeout_seconds: 30\n",
		"reclaim_min_idle_ms: 1500\nlease_ttl_ms: 1500\nhandler_timeout_ms: 500\n",
		"batch_sise: 10\n", "block_ms: -1\n", "block_ms: 9223372036854775807\n", "block_ms: 9223372036854\n",
		"idle_timeout_seconds: 9223372036\n", "read_mode: [1]\n", "[]", "~", "", "block_ms: 1e3\n", "{block_ms: 0x10}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		c := DefaultConfig()
		if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
			return
		}
		if c.validate() != nil {
			return
		}
		var y yamlConfig
		if err := yaml.Unmarshal([]byte(doc), &y); err != nil {
			t.Fatalf("the config decoded, its yamlConfig did not: %v", err)
		}
		for _, d := range []struct {
			name string
			got  time.Duration
			v    *int64
			unit time.Duration
		}{
			{"batch_wait_ms", c.BatchWait, y.BatchWaitMS, time.Millisecond},
			{"block_ms", c.Block, y.BlockMS, time.Millisecond},
			{"poll_interval_ms", c.PollInterval, y.PollIntervalMS, time.Millisecond},
			{"idle_timeout_seconds", c.IdleTimeout, y.IdleTimeoutSeconds, time.Second},
			{"start_consumer_min_interval_ms", c.StartConsumerMinInterval, y.StartConsumerMinMS, time.Millisecond},
			{"stop_consumer_min_interval_ms", c.StopConsumerMinInterval, y.StopConsumerMinMS, time.Millisecond},
			{"reclaim_min_idle_ms", c.ReclaimMinIdle, y.ReclaimMinIdleMS, time.Millisecond},
			{"reclaim_interval_ms", c.ReclaimInterval, y.ReclaimIntervalMS, time.Millisecond},
			{"handler_timeout_ms", c.HandlerTimeout, y.HandlerTimeoutMS, time.Millisecond},
			{"lease_ttl_ms", c.LeaseTTL, y.LeaseTTLMS, time.Millisecond},
		} {
			if d.v != nil && *d.v != 0 && d.got/d.unit != time.Duration(*d.v) {
				t.Fatalf("%s: %d in the YAML, %v in the validated config", d.name, *d.v, d.got)
			}
		}
	})
}
