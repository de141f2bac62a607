package issue

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// Defaults and bounds of [WebhookConfig].
const (
	// DefaultWebhookTimeoutMS is how long one call may take.
	DefaultWebhookTimeoutMS = 5_000
	// DefaultWebhookConcurrency is how many calls of one batch run at once.
	DefaultWebhookConcurrency = 8
	// DefaultWebhookBaseBackoffMS is the pause after an endpoint's first
	// failure in a row, doubled after each further one.
	DefaultWebhookBaseBackoffMS = 250
	// DefaultWebhookMaxBackoffMS bounds that pause.
	DefaultWebhookMaxBackoffMS = 30_000
	// MaxWebhookRetryAfter bounds how long a Retry-After answer holds the
	// endpoint's calls back.
	MaxWebhookRetryAfter = 10 * time.Minute
	// MinWebhookSecretLength is the shortest signing secret, in bytes.
	MinWebhookSecretLength = 16
	// SignatureHeader is the header that carries a call's signature.
	SignatureHeader = "Dibs-Signature"
	// webhookBodyLimit is how much of an answer is read.
	webhookBodyLimit = 64 << 10
	// webhookReasonLimit is how much of a refusal's body a dead letter's
	// reason keeps.
	webhookReasonLimit = 512
)

// WebhookConfig tunes the webhook issuer; zero fields take the defaults.
// Its YAML form is the `issue.webhook:` section of dibs serve's file.
type WebhookConfig struct {
	// TimeoutMS is how long one call may take, in ms, 1 to 60,000.
	TimeoutMS int `yaml:"timeout_ms"`
	// Concurrency is how many calls of one batch run at once, 1 to 64.
	Concurrency int `yaml:"concurrency"`
	// BaseBackoffMS is the pause after an endpoint's first failure in a
	// row, in ms; each further failure doubles it, up to MaxBackoffMS.
	BaseBackoffMS int `yaml:"base_backoff_ms"`
	// MaxBackoffMS bounds the pause, in ms, up to 600,000.
	MaxBackoffMS int `yaml:"max_backoff_ms"`
}

func (c WebhookConfig) withDefaults() WebhookConfig {
	if c.TimeoutMS == 0 {
		c.TimeoutMS = DefaultWebhookTimeoutMS
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultWebhookConcurrency
	}
	if c.BaseBackoffMS == 0 {
		c.BaseBackoffMS = DefaultWebhookBaseBackoffMS
	}
	if c.MaxBackoffMS == 0 {
		c.MaxBackoffMS = DefaultWebhookMaxBackoffMS
	}
	return c
}

func (c WebhookConfig) validate() error {
	switch {
	case c.TimeoutMS < 1 || c.TimeoutMS > 60_000:
		return fmt.Errorf("issue: WebhookConfig.TimeoutMS must be 1 to 60000, got %d", c.TimeoutMS)
	case c.Concurrency < 1 || c.Concurrency > 64:
		return fmt.Errorf("issue: WebhookConfig.Concurrency must be 1 to 64, got %d", c.Concurrency)
	case c.BaseBackoffMS < 1 || c.BaseBackoffMS > c.MaxBackoffMS:
		return fmt.Errorf("issue: WebhookConfig.BaseBackoffMS must be 1 to MaxBackoffMS, got %d", c.BaseBackoffMS)
	case c.MaxBackoffMS > 600_000:
		return fmt.Errorf("issue: WebhookConfig.MaxBackoffMS must be at most 600000, got %d", c.MaxBackoffMS)
	}
	return nil
}

// Concurrent is implemented by an Issuer whose calls are slow because they
// call out: the confirmation pipeline asks it for the claims of one batch
// up to Concurrency at a time instead of one after another.
type Concurrent interface {
	Concurrency() int
}

// WebhookClaim is the JSON body the webhook issuer posts for a claim.
type WebhookClaim struct {
	ClaimID     string    `json:"claim_id"`
	PromotionID string    `json:"promotion_id"`
	UserID      string    `json:"user_id"`
	Rank        int64     `json:"rank"`
	Slot        int       `json:"slot"`
	AcceptedAt  time.Time `json:"accepted_at"`
	Value       int64     `json:"value"`
}

// WebhookError is a call to a promotion's webhook that did not succeed:
// an answer other than 2xx or 409 (or, to a revoke, 404), or no answer. The issuer wraps it with
// stream.Transient or stream.Permanent.
type WebhookError struct {
	URL    string
	Status int    // the answer's status; 0 without an answer
	Body   string // the start of the answer's body, at most 512 bytes
	// RetryAfter is the delay a 429 or 503 answer asked for; 0 for none.
	RetryAfter time.Duration
	Err        error // why there was no answer; nil with one
}

func (e *WebhookError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("webhook %s: %v", e.URL, e.Err)
	}
	s := fmt.Sprintf("webhook %s answered %d", e.URL, e.Status)
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

func (e *WebhookError) Unwrap() error { return e.Err }

var _ Revoker = (*Webhook)(nil)

// ErrWebhookBackingOff means the endpoint failed recently and its pause
// is not over: the claim was not posted this time (a transient failure).
var ErrWebhookBackingOff = errors.New("issue: webhook backing off")

// Webhook issues a claim by posting it to the promotion's WebhookURL, for
// teams that already run their own coupon service. See docs/contract.md
// for the request and its signature.
//
// Each call carries Idempotency-Key: <claim_id>, the same for every
// delivery of the claim, and a Dibs-Signature header: t=<unix
// seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by the secret>. The
// answer decides:
//
//   - 2xx, or 409 (the partner has this key already): issued. A JSON
//     object answer with a "code" string of 1 to 64 printable characters
//     is stored as the claim's code, with the promotion's value.
//   - 429, 5xx, a timeout or no answer: a transient failure (the claim
//     stays pending, never moving towards the dead letters), and the
//     endpoint backs off: no call to it before a pause that doubles with
//     each failure in a row, with jitter (half to all of it), and at least
//     as long as a Retry-After answer asks (up to MaxWebhookRetryAfter).
//   - any other status (a 4xx, or a redirect, which is not followed): a
//     permanent failure, dead-lettered at once, the status and the start
//     of the answer in the reason.
//
// The pause is kept per URL, inside the issuer, since a stream's transient
// failure carries no delay: while it runs, Grant answers
// ErrWebhookBackingOff (transient) at once, and the stream's own backoff
// retries the batch. A success ends it.
//
// Webhook is a Revoker too: a revoked claim is posted again, as a revoke
// (see Revoke).
type Webhook struct {
	secret []byte
	cfg    WebhookConfig
	client *http.Client
	now    func() time.Time
	// backoffs maps a URL (its claims' calls) or "revoke <URL>" (its
	// revoke calls) to its *endpoint while it is failing; each entry's
	// fields are atomics.
	backoffs sync.Map
}

// endpoint is a failing URL's backoff state.
type endpoint struct {
	failures atomic.Int32
	until    atomic.Int64 // unix nanoseconds before which no call is made
	last     atomic.Pointer[string]
}

// NewWebhook returns a webhook issuer signing with secret (at least
// MinWebhookSecretLength bytes). client nil is a client of its own; now nil
// is time.Now. An error names the field of cfg that cannot work.
func NewWebhook(secret string, cfg WebhookConfig, client *http.Client, now func() time.Time) (*Webhook, error) {
	if len(secret) < MinWebhookSecretLength {
		return nil, fmt.Errorf("issue: the webhook secret must be at least %d bytes", MinWebhookSecretLength)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if now == nil {
		now = time.Now
	}
	return &Webhook{secret: []byte(secret), cfg: cfg, client: &c, now: now}, nil
}

// Concurrency implements Concurrent.
func (w *Webhook) Concurrency() int { return w.cfg.Concurrency }

// Sign returns the Dibs-Signature header value of body signed at t with
// secret: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Grant implements Issuer.
func (w *Webhook) Grant(ctx context.Context, p store.Promotion, c store.Issue) (Grant, error) {
	url := p.WebhookURL
	if url == "" {
		return Grant{}, stream.Permanent(fmt.Errorf("promotion %s has no webhook_url", p.ID))
	}
	body, err := json.Marshal(WebhookClaim{
		ClaimID: c.ClaimID, PromotionID: c.PromotionID, UserID: c.UserID, Rank: c.Rank, Slot: c.Slot,
		AcceptedAt: c.AcceptedAt.UTC(), Value: p.Value,
	})
	if err != nil {
		return Grant{}, err
	}
	answer, err := w.call(ctx, url, url, c.ClaimID, body, func(status int) bool { return status == http.StatusConflict })
	if err != nil {
		return Grant{}, err
	}
	return Grant{Code: partnerCode(answer), Value: p.Value}, nil
}

// WebhookRevoke is the JSON body the webhook issuer posts to undo a
// revoked claim (see Webhook.Revoke).
type WebhookRevoke struct {
	// Action is always "revoke".
	Action      string    `json:"action"`
	ClaimID     string    `json:"claim_id"`
	PromotionID string    `json:"promotion_id"`
	UserID      string    `json:"user_id"`
	Rank        int64     `json:"rank"`
	Slot        int       `json:"slot"`
	IssuedAt    time.Time `json:"issued_at"`
	RevokedAt   time.Time `json:"revoked_at"`
	// Code is the code the partner answered when the claim was issued;
	// empty (left out) for none.
	Code string `json:"code,omitempty"`
}

// RevokeIdempotencySuffix ends the Idempotency-Key of a revoke call:
// "<claim_id>:revoke".
const RevokeIdempotencySuffix = ":revoke"

// Revoke implements Revoker: it posts a WebhookRevoke of c to the
// promotion's WebhookURL with Idempotency-Key: <claim_id>:revoke, signed
// as Grant's calls are. 2xx, 404 (the partner does not know the claim:
// nothing to undo) and 409 (it has this key already) are done. Any other
// answer, or none, is an error, and the revoke is posted again later by
// the caller's sweep: a 429, 5xx, a timeout or no answer wrapped as
// stream.Transient, any other status as stream.Permanent (the partner
// refused: the promotion manager records the refusal with the answer and
// does not post it again, see promotion.Manager.Revoke). Each failure backs the endpoint's revoke calls off
// as failures of Grant do (while the pause runs Revoke answers
// ErrWebhookBackingOff at once), apart from its claims' calls, so a
// refused revoke never holds issuance back.
func (w *Webhook) Revoke(ctx context.Context, p store.Promotion, c store.Issued) error {
	url := p.WebhookURL
	if url == "" {
		return stream.Permanent(fmt.Errorf("promotion %s has no webhook_url", p.ID))
	}
	body, err := json.Marshal(WebhookRevoke{Action: "revoke",
		ClaimID: c.ClaimID, PromotionID: c.PromotionID, UserID: c.UserID, Rank: c.Rank, Slot: c.Slot,
		IssuedAt: c.IssuedAt.UTC(), RevokedAt: c.RevokedAt.UTC(), Code: c.Grant.Code,
	})
	if err != nil {
		return err
	}
	_, err = w.call(ctx, url, "revoke "+url, c.ClaimID+RevokeIdempotencySuffix, body, func(status int) bool {
		return status == http.StatusConflict || status == http.StatusNotFound
	})
	if err != nil && errors.Is(err, stream.ErrPermanent) {
		// Refused: back off all the same, so the sweep does not call
		// again at every tick.
		var we *WebhookError
		if errors.As(err, &we) {
			_ = w.failed("revoke "+url, w.now(), we)
		}
	}
	return err
}

// call posts body to url, signed, with idemKey, unless backoffKey's pause
// runs (ErrWebhookBackingOff, transient), and returns the answer's body if
// its status is 2xx or done says it counts as done. A 429, 5xx, timeout or
// no answer is transient and backs backoffKey off; any other status is
// permanent.
func (w *Webhook) call(ctx context.Context, url, backoffKey, idemKey string, body []byte, done func(status int) bool) ([]byte, error) {
	now := w.now()
	if v, ok := w.backoffs.Load(backoffKey); ok {
		e := v.(*endpoint)
		if until := time.Unix(0, e.until.Load()); now.Before(until) {
			last := ""
			if l := e.last.Load(); l != nil {
				last = ": last " + *l
			}
			return nil, stream.Transient(fmt.Errorf("%w: %s until %s%s", ErrWebhookBackingOff, url, until.UTC().Format(time.RFC3339Nano), last))
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, time.Duration(w.cfg.TimeoutMS)*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, stream.Permanent(fmt.Errorf("webhook %s: %w", url, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "dibs-webhook")
	req.Header.Set("Idempotency-Key", idemKey)
	req.Header.Set(SignatureHeader, Sign(w.secret, now, body))
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The handler's own deadline or a stop, not the endpoint.
			return nil, stream.Transient(fmt.Errorf("webhook %s: %w", url, ctx.Err()))
		}
		return nil, w.failed(backoffKey, now, &WebhookError{URL: url, Err: err})
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, webhookBodyLimit))
	_ = resp.Body.Close()
	status := resp.StatusCode
	switch {
	case status/100 == 2 || done(status):
		w.backoffs.Delete(backoffKey)
		return answer, nil
	case err != nil:
		return nil, w.failed(backoffKey, now, &WebhookError{URL: url, Status: status, Err: err})
	case status == http.StatusTooManyRequests || status/100 == 5:
		return nil, w.failed(backoffKey, now, &WebhookError{URL: url, Status: status,
			Body: truncate(answer), RetryAfter: retryAfter(resp.Header.Get("Retry-After"), now)})
	default:
		return nil, stream.Permanent(&WebhookError{URL: url, Status: status, Body: truncate(answer)})
	}
}

// failed records a failure of the calls kept under backoffKey (a URL, or
// "revoke <URL>") at now: their pause grows, and lasts at least what
// e.RetryAfter asks. It returns e as a transient error.
func (w *Webhook) failed(backoffKey string, now time.Time, e *WebhookError) error {
	v, _ := w.backoffs.LoadOrStore(backoffKey, &endpoint{})
	ep := v.(*endpoint)
	n := ep.failures.Add(1)
	d := time.Duration(w.cfg.BaseBackoffMS) * time.Millisecond
	limit := time.Duration(w.cfg.MaxBackoffMS) * time.Millisecond
	for i := int32(1); i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	d = d/2 + rand.N(d/2+1) // jitter: half to all of the pause
	d = max(d, min(e.RetryAfter, MaxWebhookRetryAfter))
	ep.until.Store(now.Add(d).UnixNano())
	msg := e.Error()
	ep.last.Store(&msg)
	return stream.Transient(e)
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(min(s, int(MaxWebhookRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return min(t.Sub(now), MaxWebhookRetryAfter)
	}
	return 0
}

// partnerCode returns the "code" of a JSON object answer if it is 1 to
// store.MaxPoolCodeLength printable characters, else "".
func partnerCode(answer []byte) string {
	var v struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(answer, &v) != nil || !ValidPoolCode(v.Code) {
		return ""
	}
	return v.Code
}

// truncate returns the start of an answer for a reason: at most
// webhookReasonLimit bytes, cut on a character boundary.
func truncate(b []byte) string {
	if len(b) <= webhookReasonLimit {
		return string(bytes.ToValidUTF8(b, []byte("?")))
	}
	cut := webhookReasonLimit
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(bytes.ToValidUTF8(b[:cut], []byte("?"))) + "…"
}
