package issue

import (
	"context"
	"fmt"
	"time"

	"github.com/dibsio/dibs/store"
)

// Grant is what an Issuer produces for one claim; see [store.Grant] for
// each field and how the store writes it.
type Grant = store.Grant

// Issuer produces what a claim receives. It is called for every delivery
// of a claim about to be written, possibly more than once for one claim
// (redeliveries, retries of a failed transaction), and the store keeps only
// the Grant of the delivery that wrote the claim's issued row. An Issuer is
// called from many goroutines at once and must be safe for that.
//
// The three shapes of issuance fit it as follows:
//
//   - computed: the Issuer only makes what is stored, such as a random code
//     ([Coupon], [Voucher]). A code that happens to be taken is made anew
//     through Grant.NewCode inside the transaction, never reissued.
//   - inside the transaction: the Issuer describes the write and the store
//     makes it with the issued row, such as the ledger entry of [Point]
//     (Grant.Points); the store's unique key on the claim id makes it
//     idempotent. Taking a code from an uploaded pool fits the same way: a
//     Grant field names the pool and the store takes a free code in the
//     transaction.
//   - calling out: the Issuer calls another system before the rows are
//     written (a partner's API) and returns what that system answered. It
//     must make the call idempotent by the claim id (an Idempotency-Key),
//     since a claim can be issued again after a crash between the call and
//     the commit; the store then writes the answer with the row.
//
// An error leaves the claim unwritten and pending. Wrap an outage of the
// other system with [github.com/dibsio/dibs/stream.Transient] so the claim
// is retried without counting towards the dead letters, and a refusal
// that retrying cannot change with stream.Permanent, which dead-letters it
// at once; other errors are retried up to the stream's max_deliveries.
type Issuer interface {
	// Grant returns what claim c of promotion p receives.
	Grant(ctx context.Context, p store.Promotion, c store.Issue) (Grant, error)
}

// IssuerFunc is a function that is an Issuer.
type IssuerFunc func(ctx context.Context, p store.Promotion, c store.Issue) (Grant, error)

// Grant calls f.
func (f IssuerFunc) Grant(ctx context.Context, p store.Promotion, c store.Issue) (Grant, error) {
	return f(ctx, p, c)
}

// Coupon gives each claim a unique, random code with a check character
// (see [Codes]), valued at the promotion's value, that does not expire —
// or, when codes were uploaded for the promotion (a code pool), a free
// code of its pool, which the store takes inside the issue transaction
// (Grant.Pool). A claim that finds the pool dry is never issued without a
// code: it fails with an error wrapping store.ErrPoolEmpty.
type Coupon struct {
	Codes *Codes
}

// Grant implements Issuer.
func (c Coupon) Grant(_ context.Context, p store.Promotion, _ store.Issue) (Grant, error) {
	code, err := c.Codes.New()
	if err != nil {
		return Grant{}, err
	}
	return Grant{Code: code, Value: p.Value, NewCode: c.Codes.New, Pool: true}, nil
}

// Voucher gives each claim a unique, random code worth the promotion's
// value that expires ValidFor after the claim was accepted (the same
// instant for every delivery of the claim).
type Voucher struct {
	Codes    *Codes
	ValidFor time.Duration
}

// Grant implements Issuer.
func (v Voucher) Grant(_ context.Context, p store.Promotion, c store.Issue) (Grant, error) {
	code, err := v.Codes.New()
	if err != nil {
		return Grant{}, err
	}
	return Grant{Code: code, Value: p.Value, ExpiresAt: c.AcceptedAt.Add(v.ValidFor).UTC(), NewCode: v.Codes.New}, nil
}

// Point credits the promotion's value to the user's balance: one ledger
// entry per claim, written with its issued row.
type Point struct{}

// Grant implements Issuer.
func (Point) Grant(_ context.Context, p store.Promotion, _ store.Issue) (Grant, error) {
	return Grant{Points: p.Value}, nil
}

// Defaults of [Config].
const (
	// DefaultVoucherValidDays is how long a voucher stays valid.
	DefaultVoucherValidDays = 30
	// MaxVoucherValidDays bounds Config.VoucherValidDays (about 100 years).
	MaxVoucherValidDays = 36500
)

// Config configures the built-in issuers. Its YAML form is the `issue:`
// section of dibs serve's configuration file.
type Config struct {
	// Codes says what coupon and voucher codes look like. Defaults to
	// DefaultAlphabet and DefaultCodeLength.
	Codes CodeConfig `yaml:"codes"`
	// VoucherValidDays is how long a voucher is valid after its claim was
	// accepted, 1 to MaxVoucherValidDays. Defaults to
	// DefaultVoucherValidDays.
	VoucherValidDays int `yaml:"voucher_valid_days"`
	// WebhookSecret signs the webhook issuer's calls (at least
	// MinWebhookSecretLength bytes). Empty: no webhook issuer, and
	// promotions of kind webhook cannot be created. dibs serve takes it
	// from DIBS_WEBHOOK_SECRET when that is set.
	WebhookSecret string `yaml:"webhook_secret"`
	// Webhook tunes the webhook issuer's calls.
	Webhook WebhookConfig `yaml:"webhook"`
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Codes = c.Codes.withDefaults()
	c.Webhook = c.Webhook.withDefaults()
	if c.VoucherValidDays == 0 {
		c.VoucherValidDays = DefaultVoucherValidDays
	}
	return c
}

// Validate names the first field of c (defaults applied) that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Codes.validate(); err != nil {
		return err
	}
	if c.VoucherValidDays < 1 || c.VoucherValidDays > MaxVoucherValidDays {
		return fmt.Errorf("issue: Config.VoucherValidDays must be 1 to %d, got %d", MaxVoucherValidDays, c.VoucherValidDays)
	}
	if c.WebhookSecret != "" && len(c.WebhookSecret) < MinWebhookSecretLength {
		return fmt.Errorf("issue: Config.WebhookSecret must be at least %d bytes", MinWebhookSecretLength)
	}
	return c.Webhook.validate()
}

// Kinds maps a promotion kind (store.KindCoupon, …) to its Issuer.
type Kinds map[string]Issuer

// Builtin returns the built-in issuers of every kind for cfg: Coupon,
// Voucher and Point, the first two sharing one code maker, and Webhook
// when cfg has a WebhookSecret. An error names the field of cfg that
// cannot work.
func Builtin(cfg Config) (Kinds, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	codes, err := NewCodes(cfg.Codes)
	if err != nil {
		return nil, err
	}
	kinds := Kinds{
		store.KindCoupon:  Coupon{Codes: codes},
		store.KindVoucher: Voucher{Codes: codes, ValidFor: time.Duration(cfg.VoucherValidDays) * 24 * time.Hour},
		store.KindPoint:   Point{},
	}
	if cfg.WebhookSecret != "" {
		w, err := NewWebhook(cfg.WebhookSecret, cfg.Webhook, nil, nil)
		if err != nil {
			return nil, err
		}
		kinds[store.KindWebhook] = w
	}
	return kinds, nil
}
