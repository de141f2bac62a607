package edge

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dibsio/dibs/ident"
)

// Defaults of [Config].
const (
	// DefaultRateLimitBackend keeps the limits in Redis, shared by every
	// instance.
	DefaultRateLimitBackend = BackendRedis
	// DefaultRateLimitTimeout bounds one limiter call to Redis; past it the
	// request goes on unlimited (see RateLimitConfig.Timeout).
	DefaultRateLimitTimeout = 250 * time.Millisecond
	// DefaultWindow is the window of a limit that names none.
	DefaultWindow = time.Second
	// DefaultIPv6PrefixLen is how many leading bits of an IPv6 client
	// address make one client for the per-IP limits: a /64 is what one
	// household or host usually gets.
	DefaultIPv6PrefixLen = 64
	// DefaultLocalMaxKeys bounds the local limiter's table.
	DefaultLocalMaxKeys = 100_000
	// DefaultLeeway is the clock skew allowed when checking a user token's
	// exp, nbf and iat.
	DefaultLeeway = 10 * time.Second
	// DefaultCORSMaxAge is how long a browser may cache a preflight answer.
	DefaultCORSMaxAge = 10 * time.Minute
	// DefaultKeyPrefix is the limiters' Redis key prefix when
	// Config.KeyPrefix is empty: the prefix of the claim keys
	// (keyspace.DefaultPrefix, which the edge does not import; a test
	// checks they agree), so a promotion's buckets share its slot.
	DefaultKeyPrefix = "dibs:"
	// MinSecretBytes is the shortest HS256 secret accepted: 256 bits.
	MinSecretBytes = 32
	// MinRSABits is the smallest RSA public key accepted for RS256.
	MinRSABits = 2048
)

// Environment variables read by [Config.ApplyEnv]: the usual place for
// secrets, which then need not sit in the configuration file.
const (
	EnvUserTokenSecret    = "DIBS_USER_TOKEN_SECRET"
	EnvUserTokenPublicKey = "DIBS_USER_TOKEN_PUBLIC_KEY"
	// EnvUserTokenSecrets holds several HS256 secrets with their key ids,
	// `k1:<secret>,k2:<secret>`, for a rotation (see ParseSecrets).
	EnvUserTokenSecrets = "DIBS_USER_TOKEN_SECRETS"
)

// Rate limiter backends.
const (
	// BackendRedis keeps the limits in Redis: every instance shares them.
	BackendRedis = "redis"
	// BackendLocal keeps them in this process: each instance limits on
	// its own, so N instances let through up to N times the limit.
	BackendLocal = "local"
)

// User token algorithms.
const (
	AlgHS256 = "HS256"
	AlgRS256 = "RS256"
	AlgEdDSA = "EdDSA"
)

// ProblemWriter writes an RFC 9457 problem: code is the dibs problem code,
// status the HTTP status, retryAfter the seconds for Retry-After (0: no
// header).
type ProblemWriter func(w http.ResponseWriter, r *http.Request, code string, status int, detail string, retryAfter int)

// Config is the `edge:` section of the dibs configuration: what lets the
// join and claim endpoints face browsers directly. The zero Config turns
// everything off: no trusted proxy, no limit, no user token, no CORS.
type Config struct {
	// TrustedProxies are the addresses (192.0.2.7, 2001:db8::1) and networks
	// (10.0.0.0/8) of the proxies in front of dibs. Only a request whose
	// direct peer is one of them has its client address read from
	// X-Forwarded-For. Defaults to none: the client address is the peer's.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// RateLimits are the per-user and per-IP limits of join and claim.
	// Defaults to none.
	RateLimits RateLimitConfig `yaml:"rate_limits"`
	// UserTokens turns on signed user tokens (JWTs). Defaults to off.
	UserTokens UserTokenConfig `yaml:"user_tokens"`
	// CORS lets browser pages from other origins call dibs. Defaults to
	// none.
	CORS CORSConfig `yaml:"cors"`

	// KeyPrefix is prepended to the limiters' Redis keys. Defaults to
	// DefaultKeyPrefix.
	KeyPrefix string `yaml:"-"`
	// AdminToken, when set, is accepted by UserToken in place of a user
	// token: such a request acts for any user (CheckUser lets any user id
	// through). Defaults to none.
	AdminToken string `yaml:"-"`
	// Problem writes the edge's problems. Defaults to a writer of the same
	// shape as the API's.
	Problem ProblemWriter `yaml:"-"`
	// Now tells the time for token checks and the local limiter. Defaults
	// to time.Now.
	Now func() time.Time `yaml:"-"`
	// Logger receives the edge's logs (never a token). Defaults to
	// slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Metrics counts the requests the edge refuses. Defaults to none.
	Metrics *Metrics `yaml:"-"`
}

// RateLimitConfig is the `rate_limits:` section.
type RateLimitConfig struct {
	// Backend is BackendRedis or BackendLocal. Defaults to BackendRedis.
	Backend string `yaml:"backend"`
	// Timeout bounds one limiter call to Redis. Defaults to
	// DefaultRateLimitTimeout.
	Timeout time.Duration `yaml:"-"`
	// TimeoutMS is Timeout in whole milliseconds, as the file writes it.
	// Defaults to 0 (Timeout's default).
	TimeoutMS int `yaml:"timeout_ms"`
	// IPv6PrefixLen is how many leading bits of an IPv6 client address
	// count as one client (1..128). Defaults to DefaultIPv6PrefixLen.
	IPv6PrefixLen int `yaml:"ipv6_prefix_len"`
	// LocalMaxKeys bounds the local backend's table: past it, idle entries
	// are dropped, and if none is idle a new client goes unlimited until
	// one is. Defaults to DefaultLocalMaxKeys.
	LocalMaxKeys int `yaml:"local_max_keys"`
	// Join limits POST /v1/promotions/{id}/queue. Defaults to none.
	Join Limits `yaml:"join"`
	// Claim limits POST /v1/promotions/{id}/claims. Defaults to none.
	Claim Limits `yaml:"claim"`
}

// Limits are the limits of one endpoint, per promotion.
type Limits struct {
	// PerUser limits each user. Defaults to none.
	PerUser Limit `yaml:"per_user"`
	// PerIP limits each client address. Defaults to none.
	PerIP Limit `yaml:"per_ip"`
}

// Limit lets Requests requests through per Window on average, and up to
// Burst at once (a token bucket, computed as GCRA). Requests 0 is no limit.
type Limit struct {
	// Requests is how many requests each Window allows. Defaults to 0: no
	// limit.
	Requests int `yaml:"requests"`
	// Window is the period Requests is counted over. Defaults to
	// DefaultWindow.
	Window time.Duration `yaml:"-"`
	// WindowSeconds is Window in whole seconds, as the file writes it.
	// Defaults to 0 (Window's default).
	WindowSeconds int `yaml:"window_seconds"`
	// Burst is how many requests may come at once after a quiet spell.
	// Defaults to Requests.
	Burst int `yaml:"burst"`
}

// On reports whether the limit is set.
func (l Limit) On() bool { return l.Requests > 0 }

// UserTokenConfig is the `user_tokens:` section: signed user tokens (JWTs)
// that join and claim requests carry as `Authorization: Bearer <jwt>`.
type UserTokenConfig struct {
	// Algorithm is AlgHS256, AlgEdDSA or AlgRS256; tokens signed with any
	// other algorithm are refused. Empty turns user tokens off. Defaults to
	// off.
	Algorithm string `yaml:"algorithm"`
	// Secret is the HS256 shared secret, at least MinSecretBytes long.
	// Best given as DIBS_USER_TOKEN_SECRET (see ApplyEnv). Defaults to
	// none.
	Secret string `yaml:"secret"`
	// PublicKey is the EdDSA or RS256 public key, PEM ("PUBLIC KEY" or, for
	// RSA, "RSA PUBLIC KEY"). Also DIBS_USER_TOKEN_PUBLIC_KEY. Defaults to
	// none.
	PublicKey string `yaml:"public_key"`
	// PublicKeyFile is a file holding PublicKey, read by New when
	// PublicKey is empty. Defaults to none.
	PublicKeyFile string `yaml:"public_key_file"`
	// Keys are keys with ids, for a rotation: a token whose header names a
	// kid is checked with the key of that id (or, if none has it, with the
	// keys that have no id), a token without kid with every key until one
	// verifies it. Secret, PublicKey and PublicKeyFile, when set, are one
	// more key without id; PublicKey and PublicKeyFile may hold several PEM
	// blocks, each a key without id. Defaults to none.
	Keys []UserTokenKey `yaml:"keys"`
	// Secrets are HS256 secrets with ids, `k1:<secret>,k2:<secret>` (see
	// ParseSecrets), keys like those of Keys. Best given as
	// DIBS_USER_TOKEN_SECRETS. Defaults to none.
	Secrets string `yaml:"secrets"`
	// Issuer, when set, must equal the token's iss. Defaults to no check.
	Issuer string `yaml:"issuer"`
	// Audience, when set, must be among the token's aud. Defaults to no
	// check.
	Audience string `yaml:"audience"`
	// Leeway is the clock skew allowed on exp, nbf and iat; negative means
	// none. Defaults to DefaultLeeway.
	Leeway time.Duration `yaml:"-"`
	// LeewaySeconds is Leeway in whole seconds, as the file writes it.
	// Defaults to 0 (Leeway's default).
	LeewaySeconds int `yaml:"leeway_seconds"`
}

// On reports whether user tokens are configured.
func (u UserTokenConfig) On() bool { return u.Algorithm != "" }

// UserTokenKey is one key of UserTokenConfig.Keys: a secret for HS256, a
// public key for EdDSA and RS256.
type UserTokenKey struct {
	// ID is the key id a token names in its kid header: 1-64 characters
	// from A-Z a-z 0-9 _ - . @, no ':' or ','. Empty: a key tried for
	// every token. Defaults to none.
	ID string `yaml:"id"`
	// Secret is the HS256 secret, at least MinSecretBytes long. Defaults
	// to none.
	Secret string `yaml:"secret"`
	// PublicKey is the EdDSA or RS256 public key, PEM. Defaults to none.
	PublicKey string `yaml:"public_key"`
	// PublicKeyFile is a file holding PublicKey, read by New when
	// PublicKey is empty. Defaults to none.
	PublicKeyFile string `yaml:"public_key_file"`
}

// ParseSecrets parses HS256 secrets with their key ids as
// UserTokenConfig.Secrets and DIBS_USER_TOKEN_SECRETS write them:
// `k1:<secret>,k2:<secret>`. A secret must not contain ',' (base64 never
// does); ids and lengths are checked by New.
func ParseSecrets(s string) ([]UserTokenKey, error) {
	var keys []UserTokenKey
	for i, part := range strings.Split(s, ",") {
		id, secret, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || id == "" || secret == "" {
			return nil, fmt.Errorf("edge: user_tokens.secrets (or %s) entry %d must be <key id>:<secret>", EnvUserTokenSecrets, i+1)
		}
		keys = append(keys, UserTokenKey{ID: id, Secret: secret})
	}
	return keys, nil
}

// CORSConfig is the `cors:` section.
type CORSConfig struct {
	// AllowedOrigins are the exact origins (scheme://host[:port]) whose
	// pages may call dibs; "*" allows any origin (not with
	// AllowCredentials). Defaults to none: no CORS header is ever sent.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowCredentials lets browsers send cookies and HTTP authentication
	// (Access-Control-Allow-Credentials). Bearer tokens set by the page's
	// script need no credentials. Defaults to false.
	AllowCredentials bool `yaml:"allow_credentials"`
	// MaxAge is how long a browser may cache a preflight answer. Defaults
	// to DefaultCORSMaxAge.
	MaxAge time.Duration `yaml:"-"`
	// MaxAgeSeconds is MaxAge in whole seconds, as the file writes it.
	// Defaults to 0 (MaxAge's default).
	MaxAgeSeconds int `yaml:"max_age_seconds"`
}

// ApplyEnv sets the user-token secret and public key from
// DIBS_USER_TOKEN_SECRET and DIBS_USER_TOKEN_PUBLIC_KEY where they are set
// (non-empty): the environment wins over the file, as for the serve flags.
// DIBS_USER_TOKEN_SECRETS, when set, replaces the file's secrets, and its
// secret unless DIBS_USER_TOKEN_SECRET is set too. lookup is os.LookupEnv
// when nil.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if v, ok := lookup(EnvUserTokenSecret); ok && v != "" {
		c.UserTokens.Secret = v
	}
	if v, ok := lookup(EnvUserTokenPublicKey); ok && v != "" {
		c.UserTokens.PublicKey = v
	}
	if v, ok := lookup(EnvUserTokenSecrets); ok && v != "" {
		c.UserTokens.Secrets = v
		if v, ok := lookup(EnvUserTokenSecret); !ok || v == "" {
			c.UserTokens.Secret = ""
		}
	}
}

func (c Config) withDefaults() Config {
	rl := &c.RateLimits
	if rl.Backend == "" {
		rl.Backend = DefaultRateLimitBackend
	}
	if rl.Timeout == 0 && rl.TimeoutMS > 0 {
		rl.Timeout = time.Duration(rl.TimeoutMS) * time.Millisecond
	}
	if rl.Timeout == 0 {
		rl.Timeout = DefaultRateLimitTimeout
	}
	if rl.IPv6PrefixLen == 0 {
		rl.IPv6PrefixLen = DefaultIPv6PrefixLen
	}
	if rl.LocalMaxKeys == 0 {
		rl.LocalMaxKeys = DefaultLocalMaxKeys
	}
	for _, l := range []*Limit{&rl.Join.PerUser, &rl.Join.PerIP, &rl.Claim.PerUser, &rl.Claim.PerIP} {
		if l.Window == 0 && l.WindowSeconds > 0 {
			l.Window = time.Duration(l.WindowSeconds) * time.Second
		}
		if l.Window == 0 {
			l.Window = DefaultWindow
		}
		if l.Burst == 0 {
			l.Burst = l.Requests
		}
	}
	ut := &c.UserTokens
	if ut.Leeway == 0 && ut.LeewaySeconds != 0 {
		ut.Leeway = time.Duration(ut.LeewaySeconds) * time.Second
	}
	if ut.Leeway == 0 {
		ut.Leeway = DefaultLeeway
	}
	if ut.Leeway < 0 {
		ut.Leeway = 0
	}
	if c.CORS.MaxAge == 0 && c.CORS.MaxAgeSeconds > 0 {
		c.CORS.MaxAge = time.Duration(c.CORS.MaxAgeSeconds) * time.Second
	}
	if c.CORS.MaxAge == 0 {
		c.CORS.MaxAge = DefaultCORSMaxAge
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Problem == nil {
		c.Problem = WriteProblem
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first setting that cannot work, naming its key,
// with the defaults filled in: what can be checked before anything starts.
// Key material is checked by New, which parses it.
func (c Config) Validate() error { return c.withDefaults().validate() }

// validate names the first setting that cannot work. Key material is
// checked by New, which parses it.
func (c Config) validate() error {
	if _, err := parseTrusted(c.TrustedProxies); err != nil {
		return err
	}
	rl := c.RateLimits
	switch {
	case rl.Backend != BackendRedis && rl.Backend != BackendLocal:
		return fmt.Errorf("edge: rate_limits.backend must be %q or %q, got %q", BackendRedis, BackendLocal, rl.Backend)
	case rl.Timeout < 0 || rl.TimeoutMS < 0:
		return fmt.Errorf("edge: rate_limits.timeout_ms must not be negative, got %s", rl.Timeout)
	case rl.IPv6PrefixLen < 1 || rl.IPv6PrefixLen > 128:
		return fmt.Errorf("edge: rate_limits.ipv6_prefix_len must be 1..128, got %d", rl.IPv6PrefixLen)
	case rl.LocalMaxKeys < 1:
		return fmt.Errorf("edge: rate_limits.local_max_keys must be at least 1, got %d", rl.LocalMaxKeys)
	}
	for _, l := range []struct {
		name string
		l    Limit
	}{
		{"join.per_user", rl.Join.PerUser}, {"join.per_ip", rl.Join.PerIP},
		{"claim.per_user", rl.Claim.PerUser}, {"claim.per_ip", rl.Claim.PerIP},
	} {
		switch {
		case l.l.Requests < 0:
			return fmt.Errorf("edge: rate_limits.%s.requests must not be negative, got %d", l.name, l.l.Requests)
		case l.l.Window < time.Millisecond || l.l.WindowSeconds < 0:
			return fmt.Errorf("edge: rate_limits.%s.window_seconds must be positive, got %s", l.name, l.l.Window)
		case l.l.Burst < 0 || (l.l.On() && l.l.Burst < 1):
			return fmt.Errorf("edge: rate_limits.%s.burst must be at least 1, got %d", l.name, l.l.Burst)
		case l.l.On() && l.l.Window/time.Duration(l.l.Requests) < time.Microsecond:
			return fmt.Errorf("edge: rate_limits.%s allows more than one request per microsecond", l.name)
		}
	}
	ut := c.UserTokens
	switch ut.Algorithm {
	case "":
	case AlgHS256:
		if ut.Secret != "" || (len(ut.Keys) == 0 && ut.Secrets == "") {
			if len(ut.Secret) < MinSecretBytes {
				return fmt.Errorf("edge: user_tokens.secret (or %s) must be at least %d bytes for HS256, got %d", EnvUserTokenSecret, MinSecretBytes, len(ut.Secret))
			}
		}
		if ut.PublicKey != "" || ut.PublicKeyFile != "" {
			return fmt.Errorf("edge: user_tokens.public_key is for EdDSA and RS256, not HS256")
		}
	case AlgEdDSA, AlgRS256:
		if ut.PublicKey == "" && ut.PublicKeyFile == "" && len(ut.Keys) == 0 {
			return fmt.Errorf("edge: user_tokens.public_key (or public_key_file, or %s) is required for %s", EnvUserTokenPublicKey, ut.Algorithm)
		}
		if ut.Secret != "" || ut.Secrets != "" {
			return fmt.Errorf("edge: user_tokens.secret is for HS256, not %s", ut.Algorithm)
		}
	default:
		return fmt.Errorf("edge: user_tokens.algorithm must be %q, %q or %q, got %q", AlgHS256, AlgEdDSA, AlgRS256, ut.Algorithm)
	}
	if ut.On() {
		if _, err := ut.allKeys(); err != nil {
			return err
		}
	}
	if c.CORS.MaxAgeSeconds < 0 || c.CORS.MaxAge < 0 {
		return fmt.Errorf("edge: cors.max_age_seconds must not be negative, got %s", c.CORS.MaxAge)
	}
	for i, o := range c.CORS.AllowedOrigins {
		if o == "*" {
			if c.CORS.AllowCredentials {
				return fmt.Errorf("edge: cors.allowed_origins[%d] \"*\" cannot go with allow_credentials", i)
			}
			continue
		}
		if err := checkOrigin(o); err != nil {
			return fmt.Errorf("edge: cors.allowed_origins[%d] %q: %w", i, o, err)
		}
	}
	return nil
}

// checkOrigin accepts an origin as browsers send it: scheme://host[:port],
// lower case, with no path, query or trailing slash.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme must be http or https")
	case u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/"):
		return fmt.Errorf("must be scheme://host[:port] with nothing after")
	case o != strings.ToLower(o):
		return fmt.Errorf("must be lower case, as browsers send it")
	}
	return nil
}

// parseTrusted parses trusted_proxies into prefixes; a bare address is a
// prefix of its full length.
func parseTrusted(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			pp, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("edge: trusted_proxies[%d] %q is not an address or a network: %w", i, s, err)
			}
			p = pp.Masked()
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("edge: trusted_proxies[%d] %q is not an address or a network: %w", i, s, err)
			}
			if a.Zone() != "" {
				return nil, fmt.Errorf("edge: trusted_proxies[%d] %q must not carry a zone", i, s)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("edge: trusted_proxies[%d] %q reaches beyond the IPv4-mapped addresses", i, s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p)
	}
	return out, nil
}

// allKeys returns Keys followed by the keys of Secrets, checked: the right
// material for the algorithm in each, ids well formed and distinct.
// Secret, PublicKey and PublicKeyFile are not among them.
func (u UserTokenConfig) allKeys() ([]UserTokenKey, error) {
	keys := slices.Clone(u.Keys)
	fromFile := len(keys)
	if u.Secrets != "" {
		more, err := ParseSecrets(u.Secrets)
		if err != nil {
			return nil, err
		}
		keys = append(keys, more...)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		name := fmt.Sprintf("edge: user_tokens.keys[%d]", i)
		if i >= fromFile {
			name = fmt.Sprintf("edge: user_tokens.secrets (or %s) entry %d", EnvUserTokenSecrets, i-fromFile+1)
		}
		if err := checkKey(u.Algorithm, k, name); err != nil {
			return nil, err
		}
		if k.ID != "" && seen[k.ID] {
			return nil, fmt.Errorf("%s: key id %q is used twice", name, k.ID)
		}
		seen[k.ID] = true
	}
	return keys, nil
}

// checkKey checks that k is a key for alg with a well-formed id; name
// says where k was configured.
func checkKey(alg string, k UserTokenKey, name string) error {
	switch {
	case k.ID != "" && (!ident.Valid(k.ID) || strings.ContainsAny(k.ID, ":,")):
		return fmt.Errorf("%s: key id %q must be 1-64 characters from A-Z a-z 0-9 _ - . @, starting with a letter or digit", name, k.ID)
	case alg == AlgHS256 && len(k.Secret) < MinSecretBytes:
		return fmt.Errorf("%s: the secret must be at least %d bytes for HS256, got %d", name, MinSecretBytes, len(k.Secret))
	case alg == AlgHS256 && (k.PublicKey != "" || k.PublicKeyFile != ""):
		return fmt.Errorf("%s: public_key is for EdDSA and RS256, not HS256", name)
	case alg != AlgHS256 && k.PublicKey == "" && k.PublicKeyFile == "":
		return fmt.Errorf("%s: public_key (or public_key_file) is required for %s", name, alg)
	case alg != AlgHS256 && k.Secret != "":
		return fmt.Errorf("%s: secret is for HS256, not %s", name, alg)
	}
	return nil
}
