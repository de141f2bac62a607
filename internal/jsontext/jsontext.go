// Package jsontext writes JSON text by hand where encoding/json's
// reflection costs too much on a hot path (a claim's answer, a batch of
// claim events), byte for byte what encoding/json writes.
package jsontext

import (
	"encoding/json"
	"strings"
)

// AppendString appends s as encoding/json encodes it: directly when it has
// nothing to escape, by encoding/json otherwise.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plain[s[i]] {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plain marks the bytes encoding/json writes as they are inside a string:
// printable ASCII but the quote, the backslash and the HTML characters it
// escapes.
var plain = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, rune(c))
	}
	return t
}()
