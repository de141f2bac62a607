// Package ident holds the rule every identifier in dibs follows: promotion
// ids, user ids, admin token names and signing key ids. An identifier is
// 1–64 characters from A-Z a-z 0-9 _ - . : @, the first a letter or a digit,
// so it is safe inside a Redis key, a URL path segment and a log line as is.
//
// The package imports nothing, so a part that only checks identifiers (the
// HTTP edge, a load generator) does not pull in the rest of dibs.
package ident

// MaxLen is the longest identifier, in bytes.
const MaxLen = 64

// Rule is the rule in words, for error messages: "must be " + Rule.
const Rule = "1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit"

// Valid reports whether s is a valid identifier: 1–64 characters from
// A-Z a-z 0-9 _ - . : @, the first a letter or digit. It runs on every
// claim, so it is a plain loop rather than a regexp.
func Valid(s string) bool {
	if len(s) < 1 || len(s) > MaxLen {
		return false
	}
	if !Alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !Byte(s[i]) {
			return false
		}
	}
	return true
}

// Alnum reports whether c is an ASCII letter or digit, the bytes an
// identifier may start with.
func Alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// Byte reports whether c may appear in an identifier after its first
// byte: a letter, a digit or one of _ - . : @.
func Byte(c byte) bool {
	return Alnum(c) || c == '_' || c == '-' || c == '.' || c == ':' || c == '@'
}
