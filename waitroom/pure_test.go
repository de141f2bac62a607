package waitroom

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAllowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate, open, now, want int64
	}{
		{100, 1000, 500, 0},
		{100, 1000, 1000, 0},
		{100, 1000, 1009, 0},
		{100, 1000, 1010, 1},
		{100, 1000, 2000, 100},
		{3, 0, 999, 2},
		{1, 0, 999, 0},
		{1_000_000, 0, 86_400_000, 86_400_000_000},
	} {
		if got := Allowed(c.rate, c.open, c.now); got != c.want {
			t.Errorf("Allowed(%d, %d, %d) = %d, want %d", c.rate, c.open, c.now, got, c.want)
		}
	}
}

func TestEstimateWait(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		pos, rate int64
		measured  float64
		want      Estimate
	}{
		{"not waiting", 0, 10, 5, Estimate{}},
		{"unmeasured", 10, 10, 0, Estimate{Wait: time.Second, Low: 900 * time.Millisecond, High: time.Second}},
		{"line slower", 10, 10, 5, Estimate{Wait: 2 * time.Second, Low: 900 * time.Millisecond, High: 2 * time.Second}},
		{"skips speed it up", 10, 10, 20, Estimate{Wait: 500 * time.Millisecond, Low: 450 * time.Millisecond, High: time.Second}},
	} {
		if got := EstimateWait(c.pos, c.rate, c.measured); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if !StockExpectedToLast(3, 3) || StockExpectedToLast(4, 3) || StockExpectedToLast(0, 3) {
		t.Error("StockExpectedToLast")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{}, "Keys"},
		{Config{Keys: testKeys, TickInterval: -1}, "TickInterval"},
		{Config{Keys: testKeys, Workers: -1}, "Workers"},
		{Config{Keys: testKeys, TickInterval: time.Second, LeaseTTL: time.Millisecond}, "LeaseTTL"},
		{Config{Keys: testKeys, TickBatch: -1}, "TickBatch"},
	} {
		if err := c.cfg.withDefaults().validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.field)
		}
	}
	if err := (Config{Keys: testKeys}).withDefaults().validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, c := range []struct {
		s     Settings
		field string
	}{
		{Settings{AdmitPerSecond: -1}, "AdmitPerSecond"},
		{Settings{AdmitPerSecond: MaxAdmitPerSecond + 1}, "AdmitPerSecond"},
		{Settings{EntryTTL: 25 * time.Hour}, "EntryTTL"},
		{Settings{AbandonAfter: -time.Second}, "AbandonAfter"},
	} {
		if err := c.s.withDefaults().validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.s, err, c.field)
		}
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	old := Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, MinSecretLen)}
	cur := Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, MinSecretLen)}
	now := time.UnixMilli(1_700_000_000_000)
	p := Pass{Promotion: "spring-drop", User: "u:1@x", ID: 42, ExpiresAt: now.Add(time.Minute)}
	s1, err := NewSigner(old)
	if err != nil {
		t.Fatal(err)
	}
	rotating, err := NewSigner(cur, old)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := NewSigner(cur)
	if err != nil {
		t.Fatal(err)
	}
	tok := s1.Sign(p)
	if strings.ContainsAny(tok, "+/=") {
		t.Fatalf("token %q is not URL-safe", tok)
	}
	t.Run("rotation", func(t *testing.T) {
		if got, err := rotating.Verify(p.Promotion, p.User, tok, now); err != nil || got != (Pass{Promotion: p.Promotion, User: p.User, ID: 42, ExpiresAt: p.ExpiresAt.UTC()}) {
			t.Fatalf("old token during the rotation: %+v, %v", got, err)
		}
		if _, err := s1.Verify(p.Promotion, p.User, rotating.Sign(p), now); !errors.Is(err, ErrForged) {
			t.Fatalf("new key's token before the new key is known: %v", err)
		}
		if _, err := s2.Verify(p.Promotion, p.User, rotating.Sign(p), now); err != nil {
			t.Fatalf("new key's token after the rotation: %v", err)
		}
		if _, err := s2.Verify(p.Promotion, p.User, tok, now); !errors.Is(err, ErrForged) {
			t.Fatalf("retired key's token: %v", err)
		}
	})
	for _, c := range []struct {
		name, promo, user, token string
		at                       time.Time
		want                     error
	}{
		{"garbage", p.Promotion, p.User, "not base64!", now, ErrForged},
		{"truncated", p.Promotion, p.User, tok[:20], now, ErrForged},
		{"tampered", p.Promotion, p.User, tok[:10] + flip(tok[10]) + tok[11:], now, ErrForged},
		{"other user", p.Promotion, "u2", tok, now, ErrNotYours},
		{"other promotion", "other", p.User, tok, now, ErrNotYours},
		{"expired", p.Promotion, p.User, tok, p.ExpiresAt, ErrExpired},
	} {
		if _, err := s1.Verify(c.promo, c.user, c.token, c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	t.Run("keys", func(t *testing.T) {
		if _, err := NewSigner(Key{ID: "k", Secret: []byte("short")}); err == nil {
			t.Error("short secret accepted")
		}
		if _, err := NewSigner(old, old); err == nil {
			t.Error("two keys with one id accepted")
		}
		if _, err := NewSigner(); err == nil {
			t.Error("no key accepted")
		}
		keys, err := ParseKeys("k2:" + strings.Repeat("Ag", 22) + ",k1:" + strings.Repeat("AQ", 22) + "==")
		if err != nil || len(keys) != 2 || keys[0].ID != "k2" || len(keys[1].Secret) != 33 {
			t.Fatalf("ParseKeys: %+v, %v", keys, err)
		}
		if _, err := ParseKeys("nocolon"); err == nil {
			t.Error("a key without id accepted")
		}
	})
}

func flip(b byte) string {
	if b == 'A' {
		return "B"
	}
	return "A"
}
