package edge

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// signKid signs c with key under method, naming kid in the header (none
// when empty).
func signKid(t *testing.T, m jwt.SigningMethod, c jwt.Claims, key any, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func nowFunc() time.Time { return now }

// call runs token through e's UserToken and returns the status and the
// problem's detail.
func call(t *testing.T, e *Edge, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/promotions/p/claims", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	e.UserToken(ok).ServeHTTP(rec, req)
	if rec.Code == 200 {
		return 200, ""
	}
	p := problemOf(t, rec)
	if p["code"] != CodeUnauthorized {
		t.Fatalf("problem %v, want unauthorized", p)
	}
	d, _ := p["detail"].(string)
	return rec.Code, d
}

// The three steps of docs/edge.md: add the new key, switch the minter, drop
// the old key. During the rotation tokens of both keys pass, with or
// without kid; afterwards the old key's get 401.
func TestUserTokenRotationHS256(t *testing.T) {
	t.Parallel()
	oldKey := []byte("old-secret-0123456789abcdef0123456789")
	newKey := []byte("new-secret-0123456789abcdef0123456789")
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == EnvUserTokenSecrets {
				return v, true
			}
			return "", false
		}
	}
	mk := func(secrets string) *Edge {
		cfg := Config{UserTokens: UserTokenConfig{Algorithm: AlgHS256, Secret: string(oldKey)}, Now: nowFunc}
		cfg.ApplyEnv(env(secrets))
		if cfg.UserTokens.Secret != "" {
			t.Fatal("DIBS_USER_TOKEN_SECRETS did not replace the file's secret")
		}
		return mustNew(t, cfg)
	}
	oldKid := signKid(t, jwt.SigningMethodHS256, claims("u-1"), oldKey, "k1")
	oldBare := signKid(t, jwt.SigningMethodHS256, claims("u-1"), oldKey, "")
	newKid := signKid(t, jwt.SigningMethodHS256, claims("u-1"), newKey, "k2")
	newBare := signKid(t, jwt.SigningMethodHS256, claims("u-1"), newKey, "")

	before := mk("k1:" + string(oldKey))
	during := mk("k1:" + string(oldKey) + ", k2:" + string(newKey))
	after := mk("k2:" + string(newKey))

	for _, tc := range []struct {
		name   string
		e      *Edge
		token  string
		want   int
		detail string
	}{
		{"before: old with kid", before, oldKid, 200, ""},
		{"before: new is unknown", before, newKid, 401, "unknown key id"},
		{"during: old with kid", during, oldKid, 200, ""},
		{"during: old without kid", during, oldBare, 200, ""},
		{"during: new with kid", during, newKid, 200, ""},
		{"during: new without kid", during, newBare, 200, ""},
		{"during: kid names the other key", during, signKid(t, jwt.SigningMethodHS256, claims("u-1"), oldKey, "k2"), 401, "signature"},
		{"during: unknown kid", during, signKid(t, jwt.SigningMethodHS256, claims("u-1"), newKey, "k9"), 401, "unknown key id"},
		{"during: neither key", during, signKid(t, jwt.SigningMethodHS256, claims("u-1"), []byte(testSecret), ""), 401, "signature"},
		{"during: expired new", during, signKid(t, jwt.SigningMethodHS256, func() jwt.RegisteredClaims {
			c := claims("u-1")
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Hour))
			return c
		}(), newKey, "k2"), 401, "expired"},
		{"after: old with kid", after, oldKid, 401, "unknown key id"},
		{"after: old without kid", after, oldBare, 401, "signature"},
		{"after: new with kid", after, newKid, 200, ""},
		{"after: new without kid", after, newBare, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, detail := call(t, tc.e, tc.token)
			if code != tc.want || !strings.Contains(detail, tc.detail) {
				t.Fatalf("status %d (%q), want %d (%q)", code, detail, tc.want, tc.detail)
			}
		})
	}
}

// Public keys rotate the same way: keys with ids in the file, or several
// PEM blocks in one value, each tried.
func TestUserTokenRotationPublicKeys(t *testing.T) {
	t.Parallel()
	k := keys()
	both := mustNew(t, Config{Now: nowFunc, UserTokens: UserTokenConfig{Algorithm: AlgRS256, PublicKey: k.rsaPEM + pubPEM(&k.otherRSA.PublicKey)}})
	byID := mustNew(t, Config{Now: nowFunc, UserTokens: UserTokenConfig{Algorithm: AlgRS256,
		Keys: []UserTokenKey{{ID: "old", PublicKey: k.rsaPEM}, {ID: "new", PublicKey: pubPEM(&k.otherRSA.PublicKey)}}}})
	onlyNew := mustNew(t, Config{Now: nowFunc, UserTokens: UserTokenConfig{Algorithm: AlgRS256,
		Keys: []UserTokenKey{{ID: "new", PublicKey: pubPEM(&k.otherRSA.PublicKey)}}}})
	oldTok := signKid(t, jwt.SigningMethodRS256, claims("u-1"), k.rsaPriv, "old")
	newTok := signKid(t, jwt.SigningMethodRS256, claims("u-1"), k.otherRSA, "new")
	oldBare := signKid(t, jwt.SigningMethodRS256, claims("u-1"), k.rsaPriv, "")
	for _, tc := range []struct {
		name  string
		e     *Edge
		token string
		want  int
	}{
		{"two PEM blocks: old", both, oldTok, 200},
		{"two PEM blocks: new", both, newTok, 200},
		{"two PEM blocks: old without kid", both, oldBare, 200},
		{"ids: old", byID, oldTok, 200},
		{"ids: new", byID, newTok, 200},
		{"ids: old without kid", byID, oldBare, 200},
		{"ids: old under the new id", byID, signKid(t, jwt.SigningMethodRS256, claims("u-1"), k.rsaPriv, "new"), 401},
		{"old removed: old", onlyNew, oldTok, 401},
		{"old removed: old without kid", onlyNew, oldBare, 401},
		{"old removed: new", onlyNew, newTok, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if code, detail := call(t, tc.e, tc.token); code != tc.want {
				t.Fatalf("status %d (%q), want %d", code, detail, tc.want)
			}
		})
	}
}
