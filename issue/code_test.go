package issue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

func mustCodes(t *testing.T, cfg issue.CodeConfig) *issue.Codes {
	t.Helper()
	c, err := issue.NewCodes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCodesShape(t *testing.T) {
	t.Parallel()
	for _, cfg := range []issue.CodeConfig{
		{},
		{Alphabet: "AB", Length: 2},
		{Alphabet: "0123456789abcdef", Length: 20}, // a power of two: no rejection
		{Alphabet: "XYZ", Length: 64},
	} {
		c := mustCodes(t, cfg)
		want := max(cfg.Length, issue.DefaultCodeLength*boolInt(cfg.Length == 0))
		alphabet := cfg.Alphabet
		if alphabet == "" {
			alphabet = issue.DefaultAlphabet
		}
		for range 1000 {
			code, err := c.New()
			if err != nil {
				t.Fatal(err)
			}
			if len(code) != want {
				t.Fatalf("%+v: code %q has length %d, want %d", cfg, code, len(code), want)
			}
			if strings.Trim(code, alphabet) != "" {
				t.Fatalf("%+v: code %q is not made of %q", cfg, code, alphabet)
			}
			if !c.Valid(code) {
				t.Fatalf("%+v: code %q is not valid", cfg, code)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestDefaultAlphabetUnambiguous(t *testing.T) {
	t.Parallel()
	if strings.ContainsAny(issue.DefaultAlphabet, "0O1IL") {
		t.Fatalf("DefaultAlphabet %q holds an ambiguous character", issue.DefaultAlphabet)
	}
	if bits := (issue.CodeConfig{}).Bits(); bits < 45 {
		t.Fatalf("default codes carry %.1f bits, want at least 45", bits)
	}
}

// TestCheckCatchesTypos changes every code in every single position to
// every other character, and swaps each pair of distinct neighbours: every
// single change must be caught, and with the default alphabet's odd size
// every swap too.
func TestCheckCatchesTypos(t *testing.T) {
	t.Parallel()
	c := mustCodes(t, issue.CodeConfig{})
	swaps, caught := 0, 0
	for range 200 {
		code, err := c.New()
		if err != nil {
			t.Fatal(err)
		}
		singleChangesCaught(t, c, issue.DefaultAlphabet, code)
		b := []byte(code)
		for i := 0; i+1 < len(b); i++ {
			if b[i] == b[i+1] {
				continue
			}
			b[i], b[i+1] = b[i+1], b[i]
			swaps++
			if !c.Valid(string(b)) {
				caught++
			}
			b[i], b[i+1] = b[i+1], b[i]
		}
	}
	if caught != swaps {
		t.Fatalf("caught %d of %d swaps of neighbours, want all", caught, swaps)
	}
	for _, bad := range []string{"", "A", "0000000000O", strings.Repeat("2", 12), "abcdefghjk2"} {
		if c.Valid(bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}

// TestCheckEvenAlphabet does the same for an alphabet of even size, where
// the check is Luhn mod N's: every single change is caught.
func TestCheckEvenAlphabet(t *testing.T) {
	t.Parallel()
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ" // 32
	c := mustCodes(t, issue.CodeConfig{Alphabet: alphabet, Length: 8})
	for range 200 {
		code, err := c.New()
		if err != nil {
			t.Fatal(err)
		}
		singleChangesCaught(t, c, alphabet, code)
	}
}

// singleChangesCaught changes each character of code to every other one
// of alphabet: none of the results may be valid.
func singleChangesCaught(t *testing.T, c *issue.Codes, alphabet, code string) {
	t.Helper()
	b := []byte(code)
	for i := range b {
		orig := b[i]
		for j := range len(alphabet) {
			if b[i] = alphabet[j]; alphabet[j] != orig && c.Valid(string(b)) {
				t.Fatalf("%q with position %d changed to %q is still valid", code, i, b[i])
			}
		}
		b[i] = orig
	}
}

func TestCodeConfigValidate(t *testing.T) {
	t.Parallel()
	for _, cfg := range []issue.CodeConfig{
		{Alphabet: "A"},
		{Alphabet: "AA"},
		{Alphabet: "A B"},
		{Alphabet: "AB\x00"},
		{Alphabet: "ABé"},
		{Alphabet: strings.Repeat("x", 129)},
		{Length: 1},
		{Length: -3},
		{Length: issue.MaxCodeLength + 1},
	} {
		if _, err := issue.NewCodes(cfg); err == nil || !strings.Contains(err.Error(), "CodeConfig.") {
			t.Errorf("NewCodes(%+v) = %v, want an error naming the field", cfg, err)
		}
	}
	for _, cfg := range []issue.Config{{VoucherValidDays: -1}, {VoucherValidDays: issue.MaxVoucherValidDays + 1}} {
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "VoucherValidDays") {
			t.Errorf("Validate(%+v) = %v, want an error naming the field", cfg, err)
		}
	}
}

func TestBuiltin(t *testing.T) {
	t.Parallel()
	kinds, err := issue.Builtin(issue.Config{VoucherValidDays: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p := store.Promotion{ID: "p", Value: 500}
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	c := store.Issue{ClaimID: "p#1", PromotionID: "p", UserID: "u", Rank: 1, Slot: 1, AcceptedAt: at}

	g, err := kinds[store.KindCoupon].Grant(ctx, p, c)
	if err != nil || len(g.Code) != issue.DefaultCodeLength || g.Value != 500 || !g.ExpiresAt.IsZero() || g.Points != 0 || g.NewCode == nil {
		t.Fatalf("coupon grant = %+v, %v", g, err)
	}
	g, err = kinds[store.KindVoucher].Grant(ctx, p, c)
	if err != nil || g.Code == "" || g.Value != 500 || !g.ExpiresAt.Equal(at.Add(7*24*time.Hour)) || g.Points != 0 {
		t.Fatalf("voucher grant = %+v, %v", g, err)
	}
	g, err = kinds[store.KindPoint].Grant(ctx, p, c)
	if err != nil || g.Code != "" || g.Points != 500 {
		t.Fatalf("point grant = %+v, %v", g, err)
	}
}
