package sqlstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/dibsio/dibs/store"
)

// PromotionQuery builds the statement of ListPromotionsBy: the promotions
// matching q, in q's order, after its cursor, at most q.Limit of them.
// place returns the placeholder of the nth argument (1-based); encode turns
// a time into the value the backend compares its time columns with.
func PromotionQuery(q store.PromotionQuery, place func(n int) string, encode func(time.Time) any) (string, []any, error) {
	var (
		args  []any
		where []string
	)
	arg := func(v any) string {
		args = append(args, v)
		return place(len(args))
	}
	switch q.Archived {
	case store.ArchivedExclude:
		where = append(where, `archived_at IS NULL`)
	case store.ArchivedOnly:
		where = append(where, `archived_at IS NOT NULL`)
	case store.ArchivedAny:
	default:
		return "", nil, fmt.Errorf("unknown archived selection %d", q.Archived)
	}
	if q.Phase != store.PhaseAny {
		now := encode(q.Now)
		switch q.Phase {
		case store.PhaseScheduled:
			where = append(where, `closed_at IS NULL AND starts_at > `+arg(now))
		case store.PhaseLive:
			where = append(where, `closed_at IS NULL AND starts_at <= `+arg(now)+` AND ends_at > `+arg(now))
		case store.PhaseEnded:
			where = append(where, `(closed_at IS NOT NULL OR ends_at <= `+arg(now)+`)`)
		case store.PhaseClosed:
			where = append(where, `closed_at IS NOT NULL`)
		default:
			return "", nil, fmt.Errorf("unknown phase %q", q.Phase)
		}
	}
	var order string
	switch q.Sort {
	case store.SortID:
		order = `id`
		if q.AfterID != "" {
			where = append(where, `id > `+arg(q.AfterID))
		}
	case store.SortCreatedAt, store.SortCreatedAtDesc:
		cmp, dir := ">", ""
		if q.Sort == store.SortCreatedAtDesc {
			cmp, dir = "<", " DESC"
		}
		order = `created_at` + dir + `, id` + dir
		if q.AfterID != "" {
			at := encode(q.AfterCreatedAt)
			where = append(where, `(created_at `+cmp+` `+arg(at)+` OR (created_at = `+arg(at)+` AND id `+cmp+` `+arg(q.AfterID)+`))`)
		}
	default:
		return "", nil, fmt.Errorf("unknown sort %q", q.Sort)
	}
	sql := `SELECT ` + PromotionCols + ` FROM promotions`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, ` AND `)
	}
	sql += ` ORDER BY ` + order + ` LIMIT ` + arg(q.Limit)
	return sql, args, nil
}

// ErasedClaimID is claimID with userID replaced by erased where the claim
// id carries it: a grant's <promotion>@<user>, and a dead letter's
// <claim_id>~<user> (whose inner claim id may be a grant's). Other claim
// ids (<promotion>#<rank>, <promotion>!<entry>) come back unchanged.
func ErasedClaimID(claimID, promotionID, userID, erased string) string {
	if inner, ok := strings.CutSuffix(claimID, "~"+userID); ok {
		return ErasedClaimID(inner, promotionID, userID, erased) + "~" + erased
	}
	if claimID == promotionID+"@"+userID {
		return promotionID + "@" + erased
	}
	return claimID
}

// ErasedFields is a dead letter's stream fields with every value equal to
// userID replaced by erased and its claim_id rewritten by ErasedClaimID.
// The map given is not changed.
func ErasedFields(f map[string]string, promotionID, userID, erased string) map[string]string {
	if f == nil {
		return nil
	}
	out := make(map[string]string, len(f))
	for k, v := range f {
		switch {
		case v == userID:
			v = erased
		case k == "claim_id":
			v = ErasedClaimID(v, promotionID, userID, erased)
		}
		out[k] = v
	}
	return out
}

// ErasedRow is one row EraseUser rewrites: where it is (its claim id) and
// what it becomes.
type ErasedRow struct {
	ClaimID    string // the stored claim id
	NewClaimID string
	Fields     string // dead letters only: the new fields as JSON text
}

// EraseIssued returns the rewrites of a user's issued rows, given each
// row's claim id and promotion.
func EraseIssued(claimIDs, promotionIDs []string, userID, erased string) []ErasedRow {
	out := make([]ErasedRow, len(claimIDs))
	for i, c := range claimIDs {
		out[i] = ErasedRow{ClaimID: c, NewClaimID: ErasedClaimID(c, promotionIDs[i], userID, erased)}
	}
	return out
}

// EraseDeadLetter returns the rewrite of one of a user's dead letters,
// its stream fields given as stored (JSON text).
func EraseDeadLetter(claimID, promotionID, fields, userID, erased string) (ErasedRow, error) {
	f, err := DecodeFields(fields)
	if err != nil {
		return ErasedRow{}, err
	}
	enc, err := EncodeFields(ErasedFields(f, promotionID, userID, erased))
	if err != nil {
		return ErasedRow{}, err
	}
	return ErasedRow{ClaimID: claimID, NewClaimID: ErasedClaimID(claimID, promotionID, userID, erased), Fields: enc}, nil
}

// ScanAudit reads a row of id, at, actor, action, promotion_id, detail (as
// text) and status.
func ScanAudit[T, N any](row Scanner, tc Times[T, N]) (store.AuditEntry, error) {
	var (
		e  store.AuditEntry
		at T
	)
	if err := row.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.PromotionID, &e.Detail, &e.Status); err != nil {
		return store.AuditEntry{}, err
	}
	var err error
	if e.At, err = tc.Decode(at); err != nil {
		return store.AuditEntry{}, err
	}
	return e, nil
}

// ScanAdminToken reads a row of name, sha256, created_at and created_by.
func ScanAdminToken[T, N any](row Scanner, tc Times[T, N]) (store.AdminToken, error) {
	var (
		t  store.AdminToken
		at T
	)
	if err := row.Scan(&t.Name, &t.SHA256, &at, &t.CreatedBy); err != nil {
		return store.AdminToken{}, err
	}
	var err error
	if t.CreatedAt, err = tc.Decode(at); err != nil {
		return store.AdminToken{}, err
	}
	return t, nil
}

// AuditDetail is the detail as stored: {} when empty.
func AuditDetail(d string) string {
	if d == "" {
		return "{}"
	}
	return d
}
