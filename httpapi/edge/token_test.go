package edge

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const testSecret = "0123456789abcdef0123456789abcdef-test"

// now is the fixed time of the token tests.
var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type testKeys struct {
	rsaPriv  *rsa.PrivateKey
	rsaPEM   string
	edPriv   ed25519.PrivateKey
	edPEM    string
	otherRSA *rsa.PrivateKey
}

// keys are made once per test binary: RSA key generation is slow.
var keys = sync.OnceValue(func() testKeys {
	var k testKeys
	var err error
	if k.rsaPriv, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.otherRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	k.rsaPEM = pubPEM(&k.rsaPriv.PublicKey)
	var edPub ed25519.PublicKey
	if edPub, k.edPriv, err = ed25519.GenerateKey(rand.Reader); err != nil {
		panic(err)
	}
	k.edPEM = pubPEM(edPub)
	return k
})

func pubPEM(pub any) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// claims returns registered claims for sub, valid around now.
func claims(sub string) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{
		Subject:   sub,
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}
}

func sign(t *testing.T, m jwt.SigningMethod, c jwt.Claims, key any) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// unsigned builds an `alg: none` token by hand.
func unsigned(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(payload)) + "."
}

func tokenEdge(t *testing.T, ut UserTokenConfig) *Edge {
	t.Helper()
	return mustNew(t, Config{UserTokens: ut, AdminToken: "admin-secret", Now: func() time.Time { return now }})
}

func TestUserToken(t *testing.T) {
	t.Parallel()
	k := keys()
	hs := tokenEdge(t, UserTokenConfig{Algorithm: AlgHS256, Secret: testSecret})
	rs := tokenEdge(t, UserTokenConfig{Algorithm: AlgRS256, PublicKey: k.rsaPEM})
	ed := tokenEdge(t, UserTokenConfig{Algorithm: AlgEdDSA, PublicKey: k.edPEM})
	strict := tokenEdge(t, UserTokenConfig{Algorithm: AlgHS256, Secret: testSecret, Issuer: "https://shop.example", Audience: "dibs", LeewaySeconds: -1})

	expired := claims("u-1")
	expired.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute))
	withinLeeway := claims("u-1")
	withinLeeway.ExpiresAt = jwt.NewNumericDate(now.Add(-5 * time.Second))
	notYet := claims("u-1")
	notYet.NotBefore = jwt.NewNumericDate(now.Add(time.Minute))
	issuedLater := claims("u-1")
	issuedLater.IssuedAt = jwt.NewNumericDate(now.Add(time.Minute))
	noExp := claims("u-1")
	noExp.ExpiresAt = nil
	good := claims("u-1")
	good.Issuer, good.Audience = "https://shop.example", jwt.ClaimStrings{"other", "dibs"}
	wrongIss := good
	wrongIss.Issuer = "https://evil.example"
	wrongAud := good
	wrongAud.Audience = jwt.ClaimStrings{"other"}

	// The RSA public key's PEM bytes used as an HS256 secret: the classic
	// algorithm-confusion forgery.
	confused := sign(t, jwt.SigningMethodHS256, claims("u-1"), []byte(k.rsaPEM))

	for _, tc := range []struct {
		name   string
		e      *Edge
		auth   string
		want   int
		user   string
		detail string
	}{
		{"HS256 valid", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, claims("u-1"), []byte(testSecret)), 200, "u-1", ""},
		{"scheme case-insensitive", hs, "bearer " + sign(t, jwt.SigningMethodHS256, claims("u-1"), []byte(testSecret)), 200, "u-1", ""},
		{"RS256 valid", rs, "Bearer " + sign(t, jwt.SigningMethodRS256, claims("user@shop"), k.rsaPriv), 200, "user@shop", ""},
		{"EdDSA valid", ed, "Bearer " + sign(t, jwt.SigningMethodEdDSA, claims("u:9"), k.edPriv), 200, "u:9", ""},
		{"iss and aud valid", strict, "Bearer " + sign(t, jwt.SigningMethodHS256, good, []byte(testSecret)), 200, "u-1", ""},
		{"admin token", hs, "Bearer admin-secret", 200, "", ""},
		{"no token", hs, "", 401, "", "required"},
		{"basic auth", hs, "Basic dTpw", 401, "", "required"},
		{"empty bearer", hs, "Bearer ", 401, "", "required"},
		{"expired", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, expired, []byte(testSecret)), 401, "", "expired"},
		{"expired within leeway", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, withinLeeway, []byte(testSecret)), 200, "u-1", ""},
		{"expired, no leeway", strict, "Bearer " + sign(t, jwt.SigningMethodHS256, func() jwt.RegisteredClaims {
			c := withinLeeway
			c.Issuer, c.Audience = good.Issuer, good.Audience
			return c
		}(), []byte(testSecret)), 401, "", "expired"},
		{"not yet valid", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, notYet, []byte(testSecret)), 401, "", "not valid yet"},
		{"issued in the future", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, issuedLater, []byte(testSecret)), 401, "", "not valid yet"},
		{"missing exp", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, noExp, []byte(testSecret)), 401, "", "exp is missing"},
		{"missing sub", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, claims(""), []byte(testSecret)), 401, "", "sub"},
		{"bad sub", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, claims("-starts-with-dash"), []byte(testSecret)), 401, "", "sub"},
		{"sub too long", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, claims(strings.Repeat("u", 65)), []byte(testSecret)), 401, "", "sub"},
		{"sub with space", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, claims("u 1"), []byte(testSecret)), 401, "", "sub"},
		{"wrong HS key", hs, "Bearer " + sign(t, jwt.SigningMethodHS256, claims("u-1"), []byte(testSecret+"x")), 401, "", "signature"},
		{"wrong RSA key", rs, "Bearer " + sign(t, jwt.SigningMethodRS256, claims("u-1"), k.otherRSA), 401, "", "signature"},
		{"alg confusion HS256 with RSA public key", rs, "Bearer " + confused, 401, "", "signature"},
		{"RS256 token to HS256 edge", hs, "Bearer " + sign(t, jwt.SigningMethodRS256, claims("u-1"), k.rsaPriv), 401, "", "signature"},
		{"RS512 with the right key", rs, "Bearer " + sign(t, jwt.SigningMethodRS512, claims("u-1"), k.rsaPriv), 401, "", "signature"},
		{"alg none", hs, "Bearer " + unsigned(`{"sub":"u-1","exp":9999999999}`), 401, "", ""},
		{"alg none to RSA edge", rs, "Bearer " + unsigned(`{"sub":"u-1","exp":9999999999}`), 401, "", ""},
		{"wrong issuer", strict, "Bearer " + sign(t, jwt.SigningMethodHS256, wrongIss, []byte(testSecret)), 401, "", "issuer"},
		{"wrong audience", strict, "Bearer " + sign(t, jwt.SigningMethodHS256, wrongAud, []byte(testSecret)), 401, "", "audience"},
		{"garbage", hs, "Bearer not.a.jwt", 401, "", "malformed"},
		{"huge", hs, "Bearer " + strings.Repeat("a", 10_000), 401, "", "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("POST", "/v1/promotions/p/claims", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			tc.e.UserToken(ok).ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want == 200 {
				if got := rec.Header().Get("X-User"); got != tc.user {
					t.Fatalf("user %q, want %q", got, tc.user)
				}
				return
			}
			p := problemOf(t, rec)
			if p["code"] != CodeUnauthorized || p["status"] != float64(401) {
				t.Fatalf("problem %v", p)
			}
			if rec.Header().Get("WWW-Authenticate") == "" || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
			}
			detail, _ := p["detail"].(string)
			if !strings.Contains(detail, tc.detail) {
				t.Fatalf("detail %q, want it to say %q", detail, tc.detail)
			}
			if tok, _ := strings.CutPrefix(tc.auth, "Bearer "); len(tok) > 8 && strings.Contains(rec.Body.String(), tok) {
				t.Fatal("the answer quotes the token")
			}
		})
	}
}

func TestUserTokenKeys(t *testing.T) {
	t.Parallel()
	k := keys()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("s", MinSecretBytes)
	file := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(file, []byte(k.edPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ut   UserTokenConfig
		want string
	}{
		{"EdDSA from file", UserTokenConfig{Algorithm: AlgEdDSA, PublicKeyFile: file}, ""},
		{"missing file", UserTokenConfig{Algorithm: AlgEdDSA, PublicKeyFile: file + ".gone"}, "public_key_file"},
		{"RSA key for EdDSA", UserTokenConfig{Algorithm: AlgEdDSA, PublicKey: k.rsaPEM}, "public_key"},
		{"Ed25519 key for RS256", UserTokenConfig{Algorithm: AlgRS256, PublicKey: k.edPEM}, "public_key"},
		{"RSA key too small", UserTokenConfig{Algorithm: AlgRS256, PublicKey: pubPEM(&small.PublicKey)}, "2048"},
		{"not PEM", UserTokenConfig{Algorithm: AlgRS256, PublicKey: "hello"}, "public_key"},
		{"secrets only", UserTokenConfig{Algorithm: AlgHS256, Secrets: "k1:" + long + ",k2:" + long + "x"}, ""},
		{"secret and keys", UserTokenConfig{Algorithm: AlgHS256, Secret: long, Keys: []UserTokenKey{{ID: "k2", Secret: long}}}, ""},
		{"secrets malformed", UserTokenConfig{Algorithm: AlgHS256, Secrets: "k1:" + long + ",oops"}, "entry 2 must be <key id>:<secret>"},
		{"secrets short", UserTokenConfig{Algorithm: AlgHS256, Secrets: "k1:short"}, "secrets (or DIBS_USER_TOKEN_SECRETS) entry 1: the secret must be at least 32 bytes"},
		{"duplicate id", UserTokenConfig{Algorithm: AlgHS256, Secrets: "k1:" + long + ",k1:" + long}, `key id "k1" is used twice`},
		{"bad id", UserTokenConfig{Algorithm: AlgHS256, Keys: []UserTokenKey{{ID: "-x", Secret: long}}}, "keys[0]: key id"},
		{"public key for HS256", UserTokenConfig{Algorithm: AlgHS256, Keys: []UserTokenKey{{ID: "a", Secret: long, PublicKey: k.edPEM}}}, "not HS256"},
		{"secret for EdDSA", UserTokenConfig{Algorithm: AlgEdDSA, Keys: []UserTokenKey{{ID: "a", Secret: long}}}, "keys[0]: public_key"},
		{"secrets for EdDSA", UserTokenConfig{Algorithm: AlgEdDSA, PublicKey: k.edPEM, Secrets: "a:" + long}, "secret is for HS256"},
		{"EdDSA keys", UserTokenConfig{Algorithm: AlgEdDSA, Keys: []UserTokenKey{{ID: "a", PublicKey: k.edPEM}}}, ""},
		{"EdDSA key not PEM", UserTokenConfig{Algorithm: AlgEdDSA, Keys: []UserTokenKey{{ID: "a", PublicKey: "nope"}}}, `key "a"`},
		{"two PEM blocks under one id", UserTokenConfig{Algorithm: AlgEdDSA, Keys: []UserTokenKey{{ID: "a", PublicKey: k.edPEM + k.edPEM}}}, "give each its own id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(Config{UserTokens: tc.ut}, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestCheckUser(t *testing.T) {
	t.Parallel()
	tokenCtx := context.WithValue(context.Background(), keyUser, "u-1")
	adminCtx := context.WithValue(context.Background(), keyAdmin, true)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		body string
		want string
		err  error
	}{
		{"tokens off: the body's user", context.Background(), "u-2", "u-2", nil},
		{"token, same user", tokenCtx, "u-1", "u-1", nil},
		{"token, body omits the user", tokenCtx, "", "u-1", nil},
		{"token, another user", tokenCtx, "u-2", "", ErrUserMismatch},
		{"admin acts for anyone", adminCtx, "u-2", "u-2", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := CheckUser(tc.ctx, tc.body)
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Fatalf("CheckUser = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestUserTokenOffPassesThrough(t *testing.T) {
	t.Parallel()
	e := mustNew(t, Config{})
	req := httptest.NewRequest("POST", "/", nil)
	req.Header.Set("Authorization", "Bearer whatever")
	rec := httptest.NewRecorder()
	e.UserToken(ok).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("X-User") != "" {
		t.Fatalf("status %d user %q", rec.Code, rec.Header().Get("X-User"))
	}
}
