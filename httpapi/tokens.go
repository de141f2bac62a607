package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

// DefaultAdminTokenName is the name of Config.AdminToken in the audit log.
const DefaultAdminTokenName = "default"

// AdminToken is a named admin token given in the configuration, known by
// the SHA-256 of its value.
type AdminToken struct {
	// Name is who the token is in the audit log: 1–64 characters of the
	// identifier alphabet, unique among the tokens.
	Name string
	// SHA256 is the SHA-256 of the token's value.
	SHA256 [sha256.Size]byte
}

// HashAdminToken returns the AdminToken for a token's value.
func HashAdminToken(name, token string) AdminToken {
	return AdminToken{Name: name, SHA256: sha256.Sum256([]byte(token))}
}

// configTokens returns the configured tokens, Config.AdminToken first, or
// an error naming the field at fault.
func (c Config) configTokens() ([]AdminToken, error) {
	var ts []AdminToken
	if c.AdminToken != "" {
		ts = append(ts, HashAdminToken(DefaultAdminTokenName, c.AdminToken))
	}
	ts = append(ts, c.AdminTokens...)
	seen := map[string]bool{}
	for _, t := range ts {
		if !promotion.ValidID(t.Name) {
			return nil, fmt.Errorf("httpapi: Config.AdminTokens: name %q must be 1-64 characters from A-Z a-z 0-9 _ - . : @", t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("httpapi: Config.AdminTokens: the name %q is given twice (%q is Config.AdminToken's)", t.Name, DefaultAdminTokenName)
		}
		if t.SHA256 == ([sha256.Size]byte{}) {
			return nil, fmt.Errorf("httpapi: Config.AdminTokens: %s has no token", t.Name)
		}
		seen[t.Name] = true
	}
	if len(ts) == 0 {
		return nil, errors.New("httpapi: Config.AdminToken or Config.AdminTokens is required")
	}
	return ts, nil
}

// tokenStore keeps the admin tokens issued through the API, by name and
// SHA-256 (hex); promotion.Records is one. Its errors are the promotion
// package's: ErrNotFound, ErrAlreadyExists.
type tokenStore interface {
	AdminTokenByHash(ctx context.Context, sha256Hex string) (promotion.AdminToken, error)
	CreateAdminToken(ctx context.Context, t promotion.AdminToken) error
	ListAdminTokens(ctx context.Context) ([]promotion.AdminToken, error)
	DeleteAdminToken(ctx context.Context, name string) error
}

// errNoAdmin means the request carries no admin token that is known.
var errNoAdmin = errors.New("no known admin token")

// errShed means the token could not be looked up: too many requests in
// flight.
var errShed = errors.New("too many requests in flight")

// adminTokens knows the admin tokens: the configured ones and those
// issued through the API, which it issues, lists and revokes.
type adminTokens struct {
	*failureLogs
	tokens []AdminToken // the configured admin tokens; read-only
	store  tokenStore   // the tokens issued through the API
	// readInflight is the Server's read slots (Config.MaxReadInFlight): a
	// lookup in the store takes one.
	readInflight chan struct{}
	m            *Metrics
}

// adminName returns the name of the admin token r carries: a configured
// one, compared in constant time (every configured hash is compared, a
// match or not), else one issued through the API, looked up by its
// SHA-256 (the lookup key is a digest of the secret, so its timing tells
// nothing of the token). errNoAdmin if none; another error if the database
// could not be asked.
func (s *adminTokens) adminName(r *http.Request) (string, error) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errNoAdmin
	}
	return s.adminBySum(r.Context(), sha256.Sum256([]byte(token)))
}

// adminBySum returns the name of the admin token whose SHA-256 is sum, as
// adminName does for the token itself.
func (s *adminTokens) adminBySum(ctx context.Context, sum [sha256.Size]byte) (string, error) {
	name := ""
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.SHA256[:]) == 1 {
			name = t.Name
		}
	}
	if name != "" {
		return name, nil
	}
	// The lookup takes a read slot, so requests with unknown tokens cannot
	// pile up on the database.
	select {
	case s.readInflight <- struct{}{}:
	default:
		s.m.Shed.Inc()
		return "", errShed
	}
	t, err := s.store.AdminTokenByHash(ctx, hex.EncodeToString(sum[:]))
	<-s.readInflight
	switch {
	case errors.Is(err, promotion.ErrNotFound):
		return "", errNoAdmin
	case err != nil:
		return "", err
	}
	return t.Name, nil
}

// createAdminToken issues a new admin token under a name: its value is in
// the answer and nowhere else; the database keeps its SHA-256.
func (s *adminTokens) createAdminToken(w http.ResponseWriter, r *http.Request) {
	var in api.AdminTokenCreate
	if pr := decodeJSON(w, r, MaxBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return
	}
	if !promotion.ValidID(in.Name) {
		problem(CodeInvalidRequest, "name must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit").withField("name").write(w, r)
		return
	}
	annotate(r, "name", in.Name)
	for _, t := range s.tokens {
		if t.Name == in.Name {
			problem(CodeAlreadyExists, "an admin token of this name is configured").write(w, r)
			return
		}
	}
	value := "dibs_" + rand.Text() + rand.Text() // 2 × 128 bits of randomness
	sum := sha256.Sum256([]byte(value))
	t := promotion.AdminToken{Name: in.Name, SHA256: hex.EncodeToString(sum[:]), CreatedAt: time.Now().UTC(),
		CreatedBy: actorOf(r)}
	err := s.store.CreateAdminToken(r.Context(), t)
	if errors.Is(err, promotion.ErrAlreadyExists) {
		problem(CodeAlreadyExists, "an admin token of this name exists").write(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiToken(t)
	out.Token = value
	w.Header().Set("Location", "/v1/admin-tokens/"+t.Name)
	writeJSON(w, http.StatusCreated, out)
}

// apiToken is t, a token issued through the API, as the API shows it.
func apiToken(t promotion.AdminToken) api.AdminToken {
	return api.AdminToken{Name: t.Name, Source: "api", CreatedAt: optTime(t.CreatedAt), CreatedBy: t.CreatedBy}
}

// listAdminTokens lists the token names, configured ones first; never a
// value or a hash.
func (s *adminTokens) listAdminTokens(w http.ResponseWriter, r *http.Request) {
	ts, err := s.store.ListAdminTokens(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.AdminTokenList{AdminTokens: make([]api.AdminToken, 0, len(s.tokens)+len(ts))}
	for _, t := range s.tokens {
		out.AdminTokens = append(out.AdminTokens, api.AdminToken{Name: t.Name, Source: "config"})
	}
	for _, t := range ts {
		out.AdminTokens = append(out.AdminTokens, apiToken(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteAdminToken revokes a token issued through the API: from the next
// request on, on every instance, it gets 401.
func (s *adminTokens) deleteAdminToken(w http.ResponseWriter, r *http.Request) {
	name, ok := pathID(w, r, "name")
	if !ok {
		return
	}
	annotate(r, "name", name)
	for _, t := range s.tokens {
		if t.Name == name {
			problem(CodeInvalidRequest, "this admin token is configured: remove it from the configuration and restart").withField("name").write(w, r)
			return
		}
	}
	err := s.store.DeleteAdminToken(r.Context(), name)
	if errors.Is(err, promotion.ErrNotFound) {
		problem(CodeNotFound, "no admin token of this name").write(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// withTimeout is the context for work that must finish after the request's
// own context ended (recording what it did).
func withTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), d)
}
