package issue

import (
	"unicode"
	"unicode/utf8"

	"github.com/dibsio/dibs/store"
)

// ValidPoolCode reports whether code can be a pool code (or a partner's
// code): valid UTF-8, 1 to store.MaxPoolCodeLength bytes, printable
// characters only and no space.
func ValidPoolCode(code string) bool {
	if len(code) < 1 || len(code) > store.MaxPoolCodeLength || !utf8.ValidString(code) {
		return false
	}
	for _, r := range code {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
