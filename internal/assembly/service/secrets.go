package service

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/dibsio/dibs/httpapi/edge"
)

// PlaceholderSecret is the value examples give a secret that must be
// replaced: a secret that is, or starts with, it is refused.
const PlaceholderSecret = "change-me"

// EnvAdminToken is the environment variable of --admin-token.
const EnvAdminToken = "DIBS_ADMIN_TOKEN"

// Environment variables of dibs serve that hold a credential, and that an
// unfilled secret store or a Secret shipped empty would set to nothing.
const (
	EnvRedisURL    = "DIBS_REDIS_URL"
	EnvDatabaseURL = "DIBS_DATABASE_URL"
)

// ServeSecretEnv are the variables CheckEnv checks for dibs serve: its
// secrets and credentials. A name ending in "_" stands for every variable
// of that prefix (the events subscribers' secrets).
var ServeSecretEnv = []string{
	EnvAdminToken, EnvWaitroomSecret, EnvEraseSecret, EnvWebhookSecret,
	edge.EnvUserTokenSecret, edge.EnvUserTokenSecrets, edge.EnvUserTokenPublicKey,
	EnvEventsSecretPrefix, EnvRedisURL, EnvDatabaseURL,
}

// keyListEnv are the variables whose value is a list of "id:secret".
var keyListEnv = map[string]bool{EnvWaitroomSecret: true, edge.EnvUserTokenSecrets: true}

// CheckEnv refuses, naming the variable, a secret or credential of the
// environment environ (os.Environ's "NAME=value" lines) that cannot be
// meant: one set but empty (a Secret shipped without values, a variable
// exported from an unset one) would otherwise fall back to a generated
// token, no key or the embedded default, and one that is the placeholder
// change-me (a copied example) would be a secret everyone knows. names
// are the variables to check (see ServeSecretEnv).
func CheckEnv(environ []string, names ...string) error {
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !checked(name, names) {
			continue
		}
		if strings.TrimSpace(value) == "" {
			return fmt.Errorf("%s is set but empty: give it a value, or unset it", name)
		}
		if placeholderIn(name, value) {
			return fmt.Errorf("%s holds the placeholder %q: replace it with a secret of your own (e.g. $(openssl rand -hex 16))", name, PlaceholderSecret)
		}
	}
	return nil
}

// checked reports whether the variable name is among names.
func checked(name string, names []string) bool {
	for _, n := range names {
		if strings.HasSuffix(n, "_") {
			if strings.HasPrefix(name, n) && len(name) > len(n) {
				return true
			}
		} else if name == n {
			return true
		}
	}
	return false
}

// placeholderIn reports whether the value of the variable name is, or
// holds as a key's secret or a URL's password, the placeholder.
func placeholderIn(name, value string) bool {
	switch {
	case name == EnvRedisURL || name == EnvDatabaseURL:
		u, err := url.Parse(value)
		if err != nil || u.User == nil {
			return false
		}
		p, _ := u.User.Password()
		return IsPlaceholder(p)
	case keyListEnv[name]:
		for _, part := range strings.Split(value, ",") {
			_, secret, _ := strings.Cut(part, ":")
			if IsPlaceholder(secret) {
				return true
			}
		}
	}
	return IsPlaceholder(value)
}

// IsPlaceholder reports whether secret is the placeholder change-me, or
// starts with it ("change-me-to-a-long-random-token").
func IsPlaceholder(secret string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(secret)), PlaceholderSecret)
}
