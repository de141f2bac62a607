package service

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/ident"
)

// EnvEraseSecret names the environment variable that sets
// Config.Admin.EraseSecret; it wins over the file.
const EnvEraseSecret = "DIBS_ERASE_SECRET"

// AdminConfig is what the operators' endpoints run with: the `admin:`
// section of the file.
type AdminConfig struct {
	// Tokens are named admin tokens beside --admin-token (whose name is
	// "default"): each is who the audit log names. Removing one and
	// restarting revokes it; tokens issued through the API
	// (POST /v1/admin-tokens) are revoked at once. Defaults to none.
	Tokens []AdminTokenConfig `yaml:"tokens"`
	// EraseSecret keys the one-way token that replaces an erased user's id
	// (DELETE /v1/users/{user_id}); keep it for good: another secret makes
	// another token. DIBS_ERASE_SECRET wins over the file. Defaults to
	// none: erasing users answers 404.
	EraseSecret string `yaml:"erase_secret"`
}

// AdminTokenConfig is one named admin token: its value, or (better, the
// file then holds no secret) the hex SHA-256 of its value.
type AdminTokenConfig struct {
	Name        string `yaml:"name"`
	Token       string `yaml:"token"`
	TokenSHA256 string `yaml:"token_sha256"`
}

// validate names the first token that cannot work.
func (a AdminConfig) validate() error {
	_, err := a.apiTokens()
	return err
}

// apiTokens returns the tokens as the API takes them.
func (a AdminConfig) apiTokens() ([]httpapi.AdminToken, error) {
	out := make([]httpapi.AdminToken, 0, len(a.Tokens))
	seen := map[string]bool{httpapi.DefaultAdminTokenName: true}
	for i, t := range a.Tokens {
		field := fmt.Sprintf("admin.tokens[%d]", i)
		if !ident.Valid(t.Name) {
			return nil, fmt.Errorf("%s.name must be %s, got %q", field, ident.Rule, t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%s.name %q is taken (%q is --admin-token's)", field, t.Name, httpapi.DefaultAdminTokenName)
		}
		seen[t.Name] = true
		switch {
		case (t.Token == "") == (t.TokenSHA256 == ""):
			return nil, fmt.Errorf("%s (%s) needs exactly one of token and token_sha256", field, t.Name)
		case IsPlaceholder(t.Token):
			return nil, fmt.Errorf("%s.token (%s) is the placeholder %q: choose a token of your own", field, t.Name, PlaceholderSecret)
		case t.Token != "":
			out = append(out, httpapi.HashAdminToken(t.Name, t.Token))
		default:
			sum, err := hex.DecodeString(strings.TrimSpace(t.TokenSHA256))
			if err != nil || len(sum) != 32 {
				return nil, fmt.Errorf("%s.token_sha256 (%s) must be 64 hex digits", field, t.Name)
			}
			at := httpapi.AdminToken{Name: t.Name}
			copy(at.SHA256[:], sum)
			out = append(out, at)
		}
	}
	return out, nil
}

// apply sets the API's admin settings from a.
func (a AdminConfig) apply(c *httpapi.Config) error {
	ts, err := a.apiTokens()
	if err != nil {
		return err
	}
	c.AdminTokens = ts
	if a.EraseSecret != "" {
		c.EraseSecret = []byte(a.EraseSecret)
	}
	return nil
}
