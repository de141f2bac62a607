package issue

import (
	"context"

	"github.com/dibsio/dibs/store"
)

// Revoker undoes, outside dibs's database, what an Issuer gave a claim
// that an admin revokes (see the promotion package's Manager.Revoke). An
// Issuer that calls out to another system implements it too, such as a
// webhook issuer that POSTs the revoke to its partner.
//
// The built-in issuers need none: what they give lives in dibs's database,
// and the store undoes it in the transaction that marks the claim revoked
// (the code is marked revoked, the points are debited by a negative ledger
// entry keyed "<claim_id>:revoke"), so it happens exactly once with it.
//
// Revoke is called after the claim is recorded revoked in the database,
// and again (by the recovery sweep) until a call returns nil, so it must be
// idempotent by the claim id: use it as the other system's Idempotency-Key.
// An error leaves the revoke to be applied again later; the claim stays
// revoked.
type Revoker interface {
	// Revoke undoes what claim c of promotion p received.
	Revoke(ctx context.Context, p store.Promotion, c store.Issued) error
}

// RevokerFunc is a function that is a Revoker.
type RevokerFunc func(ctx context.Context, p store.Promotion, c store.Issued) error

// Revoke calls f.
func (f RevokerFunc) Revoke(ctx context.Context, p store.Promotion, c store.Issued) error {
	return f(ctx, p, c)
}
