package waitroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MinSecretLen is the shortest signing secret accepted, in bytes.
const MinSecretLen = 32

// maxKeyIDLen bounds a key id, which every token carries.
const maxKeyIDLen = 16

// tokenVersion is the first byte of every token's body.
const tokenVersion = 1

// macDomain separates entry-token signatures from any other use of the
// secret.
const macDomain = "dibs-waitroom-entry-v1\x00"

// Key is one signing key: an id carried in the tokens it signs, and the
// secret shared by every instance.
type Key struct {
	// ID names the key in tokens: 1–16 characters, unique within a Signer.
	ID string
	// Secret is the HMAC-SHA256 key, at least MinSecretLen bytes.
	Secret []byte
}

// Pass is an admission: it lets its user claim once in its promotion until
// it expires.
type Pass struct {
	// Promotion and User are whom the pass is for.
	Promotion, User string
	// ID is the pass's number within the room (1, 2, … in order of
	// admission).
	ID int64
	// ExpiresAt is when the pass stops letting in (ms precision, Redis time).
	ExpiresAt time.Time
}

// Signer signs and verifies entry tokens with one or two keys: the first
// signs, and a token signed by either verifies, so a secret can be rotated
// without refusing passes already handed out. It is safe for concurrent use.
type Signer struct {
	keys []Key
}

// NewSigner returns a Signer for keys: one, or two during a rotation; the
// first signs.
func NewSigner(keys ...Key) (*Signer, error) {
	if len(keys) == 0 || len(keys) > 2 {
		return nil, fmt.Errorf("waitroom: Keys must hold one or two keys, got %d", len(keys))
	}
	out := make([]Key, len(keys))
	for i, k := range keys {
		if k.ID == "" || len(k.ID) > maxKeyIDLen {
			return nil, fmt.Errorf("waitroom: Keys[%d].ID must be 1–%d bytes, got %q", i, maxKeyIDLen, k.ID)
		}
		if len(k.Secret) < MinSecretLen {
			return nil, fmt.Errorf("waitroom: Keys[%d].Secret (key %q) must be at least %d bytes, got %d", i, k.ID, MinSecretLen, len(k.Secret))
		}
		out[i] = Key{ID: k.ID, Secret: append([]byte(nil), k.Secret...)}
	}
	if len(out) == 2 && out[0].ID == out[1].ID {
		return nil, fmt.Errorf("waitroom: Keys must have distinct ids, got %q twice", out[0].ID)
	}
	return &Signer{keys: out}, nil
}

// ParseKeys reads keys written as a comma-separated list of id:secret, the
// secret in base64 (standard or URL alphabet, padded or not), the signing
// key first: the form of the DIBS_WAITROOM_SECRET environment variable, for
// example "k2:…,k1:…" during a rotation.
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	for i, part := range strings.Split(s, ",") {
		id, enc, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("waitroom: key %d: want id:base64-secret", i+1)
		}
		secret, err := decodeSecret(enc)
		if err != nil {
			return nil, fmt.Errorf("waitroom: key %d (%q): secret is not base64: %w", i+1, id, err)
		}
		keys = append(keys, Key{ID: id, Secret: secret})
	}
	return keys, nil
}

func decodeSecret(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	s = strings.NewReplacer("+", "-", "/", "_").Replace(s)
	return base64.RawURLEncoding.DecodeString(s)
}

// Sign returns the entry token of p: opaque URL-safe base64 (no padding)
// carrying the signing key's id, the promotion, the user, the pass id and
// the expiry, with an HMAC-SHA256 over all of them.
func (s *Signer) Sign(p Pass) string {
	k := s.keys[0]
	body := make([]byte, 0, 4+len(k.ID)+len(p.Promotion)+len(p.User)+2*binary.MaxVarintLen64+sha256.Size)
	body = append(body, tokenVersion)
	body = appendString(body, k.ID)
	body = appendString(body, p.Promotion)
	body = appendString(body, p.User)
	body = binary.AppendUvarint(body, uint64(p.ID))
	body = binary.AppendUvarint(body, uint64(p.ExpiresAt.UnixMilli()))
	return base64.RawURLEncoding.EncodeToString(append(body, mac(k.Secret, body)...))
}

// Verify checks token for user in promotion at now and returns its pass. It
// answers ErrForged for anything not signed by one of the keys, ErrNotYours
// for a genuine token of another user or promotion, and ErrExpired for one
// past its expiry. Whether the pass was spent only Redis knows: see
// SpendScript.
func (s *Signer) Verify(promotion, user, token string, now time.Time) (Pass, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 1+sha256.Size {
		return Pass{}, ErrForged
	}
	body, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	p, kid, err := parseBody(body)
	if err != nil {
		return Pass{}, ErrForged
	}
	var key *Key
	for i := range s.keys {
		if s.keys[i].ID == kid {
			key = &s.keys[i]
		}
	}
	if key == nil || !hmac.Equal(sum, mac(key.Secret, body)) {
		return Pass{}, ErrForged
	}
	if p.Promotion != promotion || p.User != user {
		return Pass{}, ErrNotYours
	}
	if !now.Before(p.ExpiresAt) {
		return Pass{}, ErrExpired
	}
	return p, nil
}

func mac(secret, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(macDomain))
	h.Write(body)
	return h.Sum(nil)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBody = errors.New("malformed token body")

// parseBody reads a token body: version, key id, promotion, user, pass id,
// expiry (ms).
func parseBody(b []byte) (Pass, string, error) {
	if len(b) == 0 || b[0] != tokenVersion {
		return Pass{}, "", errBody
	}
	b = b[1:]
	var strs [3]string
	for i := range strs {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return Pass{}, "", errBody
		}
		strs[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	id, w := binary.Uvarint(b)
	if w <= 0 || id > 1<<62 {
		return Pass{}, "", errBody
	}
	b = b[w:]
	exp, w := binary.Uvarint(b)
	if w <= 0 || w != len(b) || exp > 1<<62 {
		return Pass{}, "", errBody
	}
	return Pass{Promotion: strs[1], User: strs[2], ID: int64(id), ExpiresAt: time.UnixMilli(int64(exp)).UTC()}, strs[0], nil
}
