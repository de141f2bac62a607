package issue

import (
	"crypto/rand"
	"fmt"
	"io"
	"math"
)

// DefaultAlphabet is the alphabet of codes: the digits and upper-case
// letters without the ones easily read as another (0 O, 1 I L). Its 31
// characters give a code of DefaultCodeLength about 49.5 bits of
// randomness.
const DefaultAlphabet = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"

// DefaultCodeLength is a code's length, its check character included.
const DefaultCodeLength = 11

// Bounds of [CodeConfig].
const (
	// MinCodeLength is the shortest code: one random character and the
	// check character.
	MinCodeLength = 2
	// MaxCodeLength is the longest code.
	MaxCodeLength = 64
)

// CodeConfig says what codes look like.
type CodeConfig struct {
	// Alphabet is the characters a code is made of: 2 to 128 distinct
	// printable ASCII characters, no space. Defaults to DefaultAlphabet.
	Alphabet string `yaml:"alphabet"`
	// Length is a code's length, its last character the check character:
	// MinCodeLength to MaxCodeLength. Defaults to DefaultCodeLength.
	Length int `yaml:"length"`
}

func (c CodeConfig) withDefaults() CodeConfig {
	if c.Alphabet == "" {
		c.Alphabet = DefaultAlphabet
	}
	if c.Length == 0 {
		c.Length = DefaultCodeLength
	}
	return c
}

// validate names the first field that cannot work.
func (c CodeConfig) validate() error {
	if n := len(c.Alphabet); n < 2 || n > 128 {
		return fmt.Errorf("issue: CodeConfig.Alphabet must have 2 to 128 characters, got %d", n)
	}
	seen := map[rune]bool{}
	for _, r := range c.Alphabet {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("issue: CodeConfig.Alphabet must be printable ASCII without space, got %q", r)
		}
		if seen[r] {
			return fmt.Errorf("issue: CodeConfig.Alphabet holds %q twice", r)
		}
		seen[r] = true
	}
	if c.Length < MinCodeLength || c.Length > MaxCodeLength {
		return fmt.Errorf("issue: CodeConfig.Length must be %d to %d, got %d", MinCodeLength, MaxCodeLength, c.Length)
	}
	return nil
}

// Bits is how many bits of randomness a code carries: (Length-1) ×
// log2(len(Alphabet)), the check character adding none.
func (c CodeConfig) Bits() float64 {
	c = c.withDefaults()
	return float64(c.Length-1) * math.Log2(float64(len(c.Alphabet)))
}

// Codes makes random codes with a check character. It is safe for
// concurrent use.
//
// Each character but the last is drawn uniformly from the alphabet with
// crypto/rand (rejection sampling, no modulo bias). The last is a check
// character in the manner of Luhn mod N, N the alphabet's size: walking the
// other characters from the right, the alphabet index of every other one,
// starting with the rightmost, is doubled and mapped back below N — by
// d/N + d%N of the doubled value as Luhn mod N does when N is even, by the
// doubled value mod N when N is odd (where Luhn's map would send two
// indexes to one) — the values are summed, and the check character is the
// one at index (N - sum%N) % N. Both maps are one to one, so every single
// mistyped character is caught; with an odd N (the default alphabet has
// 31 characters) so is every swap of two different neighbours, with an
// even N most of them. [Codes.Valid] recomputes it.
type Codes struct {
	alphabet string
	index    [256]int8 // alphabet index of each byte, -1 if not in it
	length   int
	limit    byte // random bytes at or above it are drawn again; 0: none are
	rand     io.Reader
}

// NewCodes returns a code maker for cfg; an error names the field that
// cannot work.
func NewCodes(cfg CodeConfig) (*Codes, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Codes{alphabet: cfg.Alphabet, length: cfg.Length, rand: rand.Reader}
	for i := range c.index {
		c.index[i] = -1
	}
	for i := range len(cfg.Alphabet) {
		c.index[cfg.Alphabet[i]] = int8(i)
	}
	if n := len(cfg.Alphabet); 256%n != 0 {
		c.limit = byte(256 - 256%n) // else 0: every byte maps evenly
	}
	return c, nil
}

// New returns a fresh random code.
func (c *Codes) New() (string, error) {
	n := len(c.alphabet)
	b := make([]byte, c.length)
	buf := make([]byte, c.length+8)
	filled := 0
	for filled < c.length-1 {
		if _, err := io.ReadFull(c.rand, buf); err != nil {
			return "", fmt.Errorf("issue: random code: %w", err)
		}
		for _, r := range buf {
			if c.limit != 0 && r >= c.limit {
				continue
			}
			b[filled] = c.alphabet[int(r)%n]
			filled++
			if filled == c.length-1 {
				break
			}
		}
	}
	b[c.length-1] = c.alphabet[c.check(b[:c.length-1])]
	return string(b), nil
}

// check returns the alphabet index of the check character of payload.
func (c *Codes) check(payload []byte) int {
	n := len(c.alphabet)
	sum, double := 0, true
	for i := len(payload) - 1; i >= 0; i-- {
		d := int(c.index[payload[i]])
		if double {
			d *= 2
			if n%2 == 0 {
				d = d/n + d%n
			} else {
				d %= n
			}
		}
		sum += d
		double = !double
	}
	return (n - sum%n) % n
}

// Valid reports whether code has this maker's length and alphabet and a
// right check character. A valid code is not necessarily one that was
// issued: look it up for that.
func (c *Codes) Valid(code string) bool {
	if len(code) != c.length {
		return false
	}
	for i := range len(code) {
		if c.index[code[i]] < 0 {
			return false
		}
	}
	return int(c.index[code[c.length-1]]) == c.check([]byte(code[:c.length-1]))
}
