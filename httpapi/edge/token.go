package edge

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dibsio/dibs/promotion"
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

// verifier checks user tokens with one key, pinned to one algorithm.
type verifier struct {
	parser *jwt.Parser
	key    any
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
	v := &verifier{parser: jwt.NewParser(opts...)}
	if c.Algorithm == AlgHS256 {
		v.key = []byte(c.Secret)
		return v, nil
	}
	pemText := []byte(c.PublicKey)
	if len(pemText) == 0 {
		b, err := os.ReadFile(c.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("edge: user_tokens.public_key_file: %w", err)
		}
		pemText = b
	}
	var err error
	switch c.Algorithm {
	case AlgRS256:
		var k *rsa.PublicKey
		k, err = jwt.ParseRSAPublicKeyFromPEM(pemText)
		if err == nil && k.N.BitLen() < MinRSABits {
			err = fmt.Errorf("RSA key of %d bits; at least %d needed", k.N.BitLen(), MinRSABits)
		}
		v.key = k
	case AlgEdDSA:
		var k crypto.PublicKey
		k, err = jwt.ParseEdPublicKeyFromPEM(pemText)
		if _, ok := k.(ed25519.PublicKey); err == nil && !ok {
			err = errors.New("not an Ed25519 key")
		}
		v.key = k
	}
	if err != nil {
		return nil, fmt.Errorf("edge: user_tokens.public_key for %s: %w", c.Algorithm, err)
	}
	return v, nil
}

// verify returns the user id of a valid token. Its errors never carry the
// token.
func (v *verifier) verify(token string) (string, error) {
	if len(token) > maxTokenBytes {
		return "", fmt.Errorf("%w: token too long", ErrBadToken)
	}
	var claims jwt.RegisteredClaims
	_, err := v.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return v.key, nil })
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrBadToken, reason(err))
	}
	if !promotion.ValidID(claims.Subject) {
		return "", fmt.Errorf("%w: sub is not a valid user id", ErrBadToken)
	}
	return claims.Subject, nil
}

// reason says why a token was refused in a few words safe to show the
// client (the library's messages may quote parts of the token).
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "not valid yet"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "exp is missing"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "bad signature or algorithm"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	}
	return "invalid"
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
			e.cfg.Problem(w, r, CodeUnauthorized, http.StatusUnauthorized, ErrNoToken.Error(), 0)
			return
		}
		if len(admin) > 0 && subtle.ConstantTimeCompare([]byte(token), admin) == 1 {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyAdmin, true)))
			return
		}
		user, err := e.verifier.verify(token)
		if err != nil {
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
