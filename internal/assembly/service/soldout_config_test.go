package service

import (
	"testing"
	"time"
)

// TestSoldOutMemoryConfig: promotions.soldout_memory_ms absent keeps the
// default, 0 turns the memory off, a value in range is taken, and one out of
// range is an error naming the key.
func TestSoldOutMemoryConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		body string
		want time.Duration // as promotion.Config.SoldOutMemory: 0 default, -1 off
		bad  bool
	}{
		"absent":   {body: "promotions:\n  retention: 1h\n", want: 0},
		"off":      {body: "promotions:\n  soldout_memory_ms: 0\n", want: -1},
		"set":      {body: "promotions:\n  soldout_memory_ms: 250\n", want: 250 * time.Millisecond},
		"negative": {body: "promotions:\n  soldout_memory_ms: -1\n", bad: true},
		"too long": {body: "promotions:\n  soldout_memory_ms: 60001\n", bad: true},
		"not int":  {body: "promotions:\n  soldout_memory_ms: 1s\n", bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadYAML(t, c.body)
			if c.bad {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Promotions.soldOutMemory(); got != c.want {
				t.Fatalf("soldOutMemory() = %s, want %s", got, c.want)
			}
		})
	}
}
