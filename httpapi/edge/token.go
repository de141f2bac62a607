package edge

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dibsio/dibs/ident"
)

// maxTokenBytes bounds the Authorization value parsed: a real user token
// is a few hundred bytes.
const maxTokenBytes = 8 << 10

// Errors of user tokens.
var (
	// ErrNoToken: tokens are required and the request carries none.
	ErrNoToken = errors.New("a user token is required: send Authorization: Bearer <token>")
	// ErrBadToken: the token is malformed, forged, expired, not yet valid,
	// for another issuer or audience, or names no valid user.
	ErrBadToken = errors.New("the user token is invalid or expired")
	// ErrUserMismatch: the body (or path) names another user than the
	// token.
	ErrUserMismatch = errors.New("user_id differs from the user of the token")
)

// errUnknownKey: the token's kid names no configured key, and every key
// has an id.
var errUnknownKey = errors.New("unknown key id")

// verifier checks user tokens with its keys, pinned to one algorithm.
// Read-only after newVerifier.
type verifier struct {
	parser *jwt.Parser
	byID   map[string]any // keys with an id
	anon   []any          // keys without one: tried for every token
	all    []any          // every key, for a token without kid
}

func newVerifier(c UserTokenConfig, now func() time.Time) (*verifier, error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{c.Algorithm}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(c.Leeway),
		jwt.WithTimeFunc(now),
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	v := &verifier{parser: jwt.NewParser(opts...), byID: map[string]any{}}
	keys, err := c.allKeys()
	if err != nil {
		return nil, err
	}
	if c.Secret != "" || c.PublicKey != "" || c.PublicKeyFile != "" {
		keys = append([]UserTokenKey{{Secret: c.Secret, PublicKey: c.PublicKey, PublicKeyFile: c.PublicKeyFile}}, keys...)
	}
	for i, k := range keys {
		parsed, err := parseKey(c.Algorithm, k)
		if err != nil {
			if k.ID != "" {
				return nil, fmt.Errorf("edge: user_tokens key %q: %w", k.ID, err)
			}
			if i > 0 || (c.Secret == "" && c.PublicKey == "" && c.PublicKeyFile == "") {
				return nil, fmt.Errorf("edge: user_tokens.keys: %w", err)
			}
			return nil, fmt.Errorf("edge: %w", err)
		}
		v.all = append(v.all, parsed...)
		if k.ID == "" {
			v.anon = append(v.anon, parsed...)
			continue
		}
		if len(parsed) != 1 {
			return nil, fmt.Errorf("edge: user_tokens key %q holds %d public keys; give each its own id", k.ID, len(parsed))
		}
		v.byID[k.ID] = parsed[0]
	}
	if len(v.all) == 0 {
		return nil, fmt.Errorf("edge: user_tokens: no key for %s", c.Algorithm)
	}
	return v, nil
}

// parseKey returns the verification keys of k for alg: its secret, or the
// public keys of its PEM blocks.
func parseKey(alg string, k UserTokenKey) ([]any, error) {
	if alg == AlgHS256 {
		return []any{[]byte(k.Secret)}, nil
	}
	pemText := []byte(k.PublicKey)
	if len(pemText) == 0 {
		b, err := os.ReadFile(k.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("user_tokens.public_key_file: %w", err)
		}
		pemText = b
	}
	var out []any
	for {
		block, rest := pem.Decode(pemText)
		if block == nil {
			break
		}
		pemText = rest
		one := pem.EncodeToMemory(block)
		var key any
		var err error
		switch alg {
		case AlgRS256:
			var pk *rsa.PublicKey
			pk, err = jwt.ParseRSAPublicKeyFromPEM(one)
			if err == nil && pk.N.BitLen() < MinRSABits {
				err = fmt.Errorf("RSA key of %d bits; at least %d needed", pk.N.BitLen(), MinRSABits)
			}
			key = pk
		case AlgEdDSA:
			var pk crypto.PublicKey
			pk, err = jwt.ParseEdPublicKeyFromPEM(one)
			if _, ok := pk.(ed25519.PublicKey); err == nil && !ok {
				err = errors.New("not an Ed25519 key")
			}
			key = pk
		}
		if err != nil {
			return nil, fmt.Errorf("user_tokens.public_key for %s: %w", alg, err)
		}
		out = append(out, key)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("user_tokens.public_key for %s: no PEM block found", alg)
	}
	return out, nil
}

// keyFor picks the keys a token is checked with: the key its kid names;
// failing that the keys without id (none: errUnknownKey); every key for a
// token without kid.
func (v *verifier) keyFor(t *jwt.Token) (any, error) {
	cands := v.all
	if kid, _ := t.Header["kid"].(string); kid != "" {
		if k, ok := v.byID[kid]; ok {
			return k, nil
		}
		if len(v.anon) == 0 {
			return nil, errUnknownKey
		}
		cands = v.anon
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	set := jwt.VerificationKeySet{Keys: make([]jwt.VerificationKey, len(cands))}
	for i, k := range cands {
		set.Keys[i] = k
	}
	return set, nil
}

// tokenError is a refused user token: why, as a metric label (one of the
// Reason… constants), and the detail shown to the client.
type tokenError struct {
	reason string
	err    error
}

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

func refuse(reason, words string) error {
	return &tokenError{reason: reason, err: fmt.Errorf("%w: %s", ErrBadToken, words)}
}

// verify returns the user id of a valid token. Its errors never carry the
// token; they are *tokenError wrapping ErrBadToken.
func (v *verifier) verify(token string) (string, error) {
	if len(token) > maxTokenBytes {
		return "", refuse(ReasonMalformed, "token too long")
	}
	var claims jwt.RegisteredClaims
	_, err := v.parser.ParseWithClaims(token, &claims, v.keyFor)
	if err != nil {
		return "", refuse(reason(err))
	}
	if !ident.Valid(claims.Subject) {
		return "", refuse(ReasonSubject, "sub is not a valid user id")
	}
	return claims.Subject, nil
}

// reason says why a token was refused: a metric label and a few words
// safe to show the client (the library's messages may quote parts of the
// token).
func reason(err error) (label, words string) {
	switch {
	case errors.Is(err, errUnknownKey):
		return ReasonUnknownKey, "unknown key id"
	case errors.Is(err, jwt.ErrTokenExpired):
		return ReasonExpired, "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ReasonNotYetValid, "not valid yet"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return ReasonMissingExp, "exp is missing"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ReasonIssuer, "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ReasonAudience, "wrong audience"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return ReasonSignature, "bad signature or algorithm"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ReasonMalformed, "malformed"
	}
	return ReasonInvalid, "invalid"
}

// bearer returns the token of an `Authorization: Bearer <token>` header;
// the scheme is matched case-insensitively (RFC 9110).
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// UserToken returns middleware that requires a valid user token when user
// tokens are on (and does nothing when they are off): the verified user id
// goes in the request's context (UserFrom). A request without one is
// answered 401 unauthorized with `WWW-Authenticate: Bearer`, as is one
// whose token is bad or expired. The admin token, when configured, is
// accepted instead and acts for any user (IsAdmin). Tokens are never
// logged.
func (e *Edge) UserToken(h http.Handler) http.Handler {
	if e.verifier == nil {
		return h
	}
	admin := []byte(e.cfg.AdminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			e.cfg.Metrics.tokenRefusedInc(ReasonMissing)
			e.cfg.Problem(w, r, CodeUnauthorized, http.StatusUnauthorized, ErrNoToken.Error(), 0)
			return
		}
		if len(admin) > 0 && subtle.ConstantTimeCompare([]byte(token), admin) == 1 {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyAdmin, true)))
			return
		}
		user, err := e.verifier.verify(token)
		if err != nil {
			var te *tokenError
			if errors.As(err, &te) {
				e.cfg.Metrics.tokenRefusedInc(te.reason)
			}
			e.cfg.Problem(w, r, CodeUnauthorized, http.StatusUnauthorized, err.Error(), 0)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyUser, user)))
	})
}

// CheckUser returns the user a join or claim acts for, given the user_id
// of its body (or path): the token's user when the request carried one —
// the body may then omit user_id, and one that differs is ErrUserMismatch,
// which the handler answers 400 invalid_request naming the field user_id —
// else bodyUserID itself (tokens off, or the admin token).
func CheckUser(ctx context.Context, bodyUserID string) (string, error) {
	user, ok := UserFrom(ctx)
	if !ok {
		return bodyUserID, nil
	}
	if bodyUserID != "" && bodyUserID != user {
		return "", ErrUserMismatch
	}
	return user, nil
}
