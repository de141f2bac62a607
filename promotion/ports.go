package promotion

import (
	"context"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/waitroom"
)

// The records an operator reads and writes beside the promotions, under
// this package's names: callers (the HTTP API among them) take them from
// here and need neither the store nor the claim package.
type (
	// AdminToken is an admin token issued through the API, known by its
	// name and the hex SHA-256 of its value.
	AdminToken = store.AdminToken
	// AuditEntry is one admin action in the audit log.
	AuditEntry = store.AuditEntry
	// Erased counts the rows Records.EraseUser rewrote.
	Erased = store.Erased
	// Issued is an issued row: a winner, in rank order.
	Issued = store.Issued
	// KnownClaim is a claim the database knows of (an issued row or a dead
	// letter), as Records.ClaimsByRank reads it.
	KnownClaim = store.KnownClaim
	// Grant is what an issued claim received: a code, its value and
	// expiry, or points.
	Grant = store.Grant
	// TimelineQuery selects the buckets of Manager.Timeline.
	TimelineQuery = store.TimelineQuery
	// TimeBucket is one bucket of a promotion's timeline.
	TimeBucket = store.TimeBucket
	// ClaimSummary is what Manager.ClaimSummary reads of a promotion's
	// claims for its report.
	ClaimSummary = store.ClaimSummary
	// ChallengeError is the waiting room's refusal of a join without a
	// valid proof of work: it carries a fresh challenge.
	ChallengeError = waitroom.ChallengeError
)

// MaxPoolCodeLength is the longest code of a promotion's pool, in bytes.
const MaxPoolCodeLength = store.MaxPoolCodeLength

// EventTypes lists every event type of the event log (Manager.Events).
var EventTypes = store.EventTypes

// The waiting room's outcomes, under their own names here: the same
// values as the waitroom package's, so errors.Is matches either.
var (
	// ErrRoomNotFound means Redis holds no waiting room of the promotion:
	// it has none, or this instance has not opened it yet.
	ErrRoomNotFound = waitroom.ErrNotFound
	// ErrNotJoined means the user has not joined the waiting room.
	ErrNotJoined = waitroom.ErrNotJoined
	// ErrRoomSoldOut means the waiting room lets nobody else in: the stock
	// is exhausted.
	ErrRoomSoldOut = waitroom.ErrSoldOut
	// ErrRoomEnded means the waiting room's promotion ended.
	ErrRoomEnded = waitroom.ErrEnded
)

// IssuerGroup is the consumer group of the issuers on every work stream.
const IssuerGroup = claim.Group

// WorkStreams returns the keys, under prefix, of the work streams of
// promotion id split into segments (one stream without segments); the
// first is the promotion's own.
func WorkStreams(prefix, id string, segments int) []string {
	tags := claim.SegmentsOf(id, segments).Tags()
	keys := make([]string, len(tags))
	for i, tag := range tags {
		keys[i] = claim.KeysFor(prefix, tag).Stream()
	}
	return keys
}

// Records reads and writes what the database keeps beside the promotions
// for the operators, with no Redis: admin tokens, the audit log, the
// issued rows in rank order, the erasure of a user. Its errors are this
// package's, like the Manager's: ErrNotFound, ErrAlreadyExists.
type Records struct{ st store.Store }

// AdminTokenByHash returns the admin token whose SHA-256 (hex) is
// sha256Hex; ErrNotFound if none.
func (r Records) AdminTokenByHash(ctx context.Context, sha256Hex string) (AdminToken, error) {
	t, err := r.st.AdminTokenByHash(ctx, sha256Hex)
	return t, domainErr(err)
}

// CreateAdminToken stores t; ErrAlreadyExists if its name is taken.
func (r Records) CreateAdminToken(ctx context.Context, t AdminToken) error {
	return domainErr(r.st.CreateAdminToken(ctx, t))
}

// ListAdminTokens returns every admin token issued through the API, by
// name.
func (r Records) ListAdminTokens(ctx context.Context) ([]AdminToken, error) {
	ts, err := r.st.ListAdminTokens(ctx)
	return ts, domainErr(err)
}

// DeleteAdminToken removes the named admin token; ErrNotFound if absent.
func (r Records) DeleteAdminToken(ctx context.Context, name string) error {
	return domainErr(r.st.DeleteAdminToken(ctx, name))
}

// AppendAudit records one admin action.
func (r Records) AppendAudit(ctx context.Context, e AuditEntry) error {
	return domainErr(r.st.AppendAudit(ctx, e))
}

// ListAudit returns up to limit audit entries with ID < beforeID (every
// entry when beforeID is 0), newest first.
func (r Records) ListAudit(ctx context.Context, beforeID int64, limit int) ([]AuditEntry, error) {
	es, err := r.st.ListAudit(ctx, beforeID, limit)
	return es, domainErr(err)
}

// EraseUser replaces every stored id of userID by erasedID, in one
// transaction, and counts the rows rewritten.
func (r Records) EraseUser(ctx context.Context, userID, erasedID string) (Erased, error) {
	n, err := r.st.EraseUser(ctx, userID, erasedID)
	return n, domainErr(err)
}

// Known returns nil if the database holds promotion id, else ErrNotFound
// (or the error that kept it from answering).
func (r Records) Known(ctx context.Context, id string) error {
	_, err := r.st.GetPromotion(ctx, id)
	return domainErr(err)
}

// IssuedByRank returns up to limit issued rows of promotion id with rank
// > afterRank, in rank order.
func (r Records) IssuedByRank(ctx context.Context, id string, afterRank int64, limit int) ([]Issued, error) {
	rows, err := r.st.IssuedByRank(ctx, id, afterRank, limit)
	return rows, domainErr(err)
}

// ClaimsByRank returns up to limit claims of promotion id the database
// knows of with rank > afterRank, in rank order.
func (r Records) ClaimsByRank(ctx context.Context, id string, afterRank int64, limit int) ([]KnownClaim, error) {
	cs, err := r.st.ClaimsByRank(ctx, id, afterRank, limit)
	return cs, domainErr(err)
}
