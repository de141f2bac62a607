package bench

import (
	"errors"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := Config{Target: "http://127.0.0.1:8080", AdminToken: "t"}
	tests := []struct {
		name   string
		modify func(*Config)
		field  string // empty: valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"trailing slash", func(c *Config) { c.Target += "/" }, ""},
		{"https", func(c *Config) { c.Target = "https://dibs.example.com" }, ""},
		{"no target", func(c *Config) { c.Target = "" }, "Target"},
		{"no scheme", func(c *Config) { c.Target = "127.0.0.1:8080" }, "Target"},
		{"ftp", func(c *Config) { c.Target = "ftp://host" }, "Target"},
		{"no token", func(c *Config) { c.AdminToken = "" }, "AdminToken"},
		{"bad promotion id", func(c *Config) { c.PromotionID = "-x" }, "PromotionID"},
		{"long promotion id", func(c *Config) { c.PromotionID = strings.Repeat("a", 65) }, "PromotionID"},
		{"negative stock", func(c *Config) { c.Stock = -1 }, "Stock"},
		{"huge stock", func(c *Config) { c.Stock = 1_000_000_001 }, "Stock"},
		{"negative users", func(c *Config) { c.Users = -5 }, "Users"},
		{"limit too high", func(c *Config) { c.PerUserLimit = 1001 }, "PerUserLimit"},
		{"negative repeat", func(c *Config) { c.Repeat = -1 }, "Repeat"},
		{"negative waves", func(c *Config) { c.Waves = -1 }, "Waves"},
		{"more waves than claims", func(c *Config) { c.Users, c.Waves = 5, 6 }, "Waves"},
		{"waves too large", func(c *Config) { c.Users, c.Waves = 100_000, 2 }, "Waves"},
		{"one wave per claim", func(c *Config) { c.Users, c.Waves = 5, 5 }, ""},
		{"concurrency too high", func(c *Config) { c.Concurrency = MaxConcurrency + 1 }, "Concurrency"},
		{"bad user prefix", func(c *Config) { c.UserPrefix = "a b" }, "UserPrefix"},
		{"user prefix too long", func(c *Config) { c.UserPrefix = strings.Repeat("u", 62); c.Users = 1000 }, "UserPrefix"},
		{"negative confirm timeout", func(c *Config) { c.ConfirmTimeout = -1 }, "ConfirmTimeout"},
		{"negative poll interval", func(c *Config) { c.PollInterval = -1 }, "PollInterval"},
		{"negative request timeout", func(c *Config) { c.RequestTimeout = -1 }, "RequestTimeout"},
		{"room with a proof of work", func(c *Config) { c.WaitingRoom, c.PowDifficulty = true, MaxPowDifficulty }, ""},
		{"proof of work without a room", func(c *Config) { c.PowDifficulty = 8 }, "PowDifficulty"},
		{"proof of work too hard", func(c *Config) { c.WaitingRoom, c.PowDifficulty = true, MaxPowDifficulty+1 }, "PowDifficulty"},
		{"negative proof of work", func(c *Config) { c.WaitingRoom, c.PowDifficulty = true, -1 }, "PowDifficulty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tt.modify(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.field+" ") {
				t.Fatalf("Validate() = %q, does not name %s", err, tt.field)
			}
		})
	}
}
