package ident_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dibsio/dibs/ident"
)

// contract is the rule as docs/contract.md words it, as a regular expression.
var contract = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$`)

// TestValidMatchesTheContract checks Valid against the contract's wording
// on crafted and generated identifiers.
func TestValidMatchesTheContract(t *testing.T) {
	t.Parallel()
	ids := []string{"", "a", "Z9", "u-123", "spring-drop", "a:b@c.d_e-f", "-a", "_a", ".a", "@a", ":a",
		"a b", "a/b", "a#1", "é", "a\x00", "a\xff", strings.Repeat("a", 64), strings.Repeat("a", 65), "0"}
	alphabet := "aZ09_-.:@ /#\x00é{}"
	for i := 0; i < 5000; i++ {
		n := i%7 + 1
		var b strings.Builder
		for j := 0; j < n; j++ {
			b.WriteByte(alphabet[(i*31+j*17)%len(alphabet)])
		}
		ids = append(ids, b.String())
	}
	for _, id := range ids {
		if got, want := ident.Valid(id), contract.MatchString(id); got != want {
			t.Errorf("Valid(%q) = %v, contract says %v", id, got, want)
		}
	}
}

// TestBytes checks Alnum and Byte over every byte value.
func TestBytes(t *testing.T) {
	t.Parallel()
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if got, want := ident.Alnum(byte(c)), contract.MatchString(s); got != want {
			t.Errorf("Alnum(%#x) = %v, want %v", c, got, want)
		}
		if got, want := ident.Byte(byte(c)), contract.MatchString("a"+s); got != want {
			t.Errorf("Byte(%#x) = %v, want %v", c, got, want)
		}
	}
}

// FuzzValid checks Valid against the contract's rule.
func FuzzValid(f *testing.F) {
	for _, s := range []string{"u-123", "a", "0", "_a", "-", "a b", "", "é", "a\x00",
		"user@example.com", strings.Repeat("1", 64), strings.Repeat("1", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ident.Valid(s), contract.MatchString(s); got != want {
			t.Fatalf("Valid(%q) = %v, want %v", s, got, want)
		}
	})
}
