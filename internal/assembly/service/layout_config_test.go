package service

import (
	"testing"
)

// TestClassicClaimsConfig: promotions.classic_claims is off (compact
// layout) unless set, true keeps new promotions classic, and a value that
// is not a boolean is an error.
func TestClassicClaimsConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		body      string
		want, bad bool
	}{
		"absent": {body: "promotions:\n  retention: 1h\n"},
		"true":   {body: "promotions:\n  classic_claims: true\n", want: true},
		"false":  {body: "promotions:\n  classic_claims: false\n"},
		"bad":    {body: "promotions:\n  classic_claims: maybe\n", bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadYAML(t, c.body)
			if c.bad != (err != nil) {
				t.Fatalf("LoadFile: %v, want an error: %v", err, c.bad)
			}
			if err == nil && cfg.Promotions.ClassicClaims != c.want {
				t.Fatalf("classic_claims = %v, want %v", cfg.Promotions.ClassicClaims, c.want)
			}
		})
	}
}

// TestBatchClaimsConfig: promotions.batch_claims is on unless set false,
// and a value that is not a boolean is an error.
func TestBatchClaimsConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		body           string
		unbatched, bad bool
	}{
		"absent": {body: "promotions:\n  retention: 1h\n"},
		"true":   {body: "promotions:\n  batch_claims: true\n"},
		"false":  {body: "promotions:\n  batch_claims: false\n", unbatched: true},
		"bad":    {body: "promotions:\n  batch_claims: maybe\n", bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadYAML(t, c.body)
			if c.bad != (err != nil) {
				t.Fatalf("LoadFile: %v, want an error: %v", err, c.bad)
			}
			if err == nil && cfg.Promotions.unbatchedClaims() != c.unbatched {
				t.Fatalf("unbatched claims = %v, want %v", cfg.Promotions.unbatchedClaims(), c.unbatched)
			}
		})
	}
}
