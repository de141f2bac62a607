package sqlstore

import (
	"fmt"

	"github.com/dibsio/dibs/store"
)

// InsertedIssues returns the issues marked Inserted so far, in batch order:
// the ones whose Grant is to be written.
func (o *Outcomes) InsertedIssues() []store.Issue {
	var out []store.Issue
	for i, x := range o.out {
		if x == store.Inserted {
			out = append(out, o.issues[i])
		}
	}
	return out
}

// CodeRow is one code to write for an inserted issue.
type CodeRow struct {
	Issue store.Issue
	Code  string // Issue.Grant.Code, or the last one NewCode made
}

// WriteCodes writes the codes of the inserted issues that have one. insert
// runs one multi-row insert that skips any row whose code is taken (ON
// CONFLICT DO NOTHING) and returns the claim ids it wrote; the others get
// a new code from their Grant.NewCode and go again, up to
// store.MaxCodeAttempts times. Issues that find no free code fail the
// whole call with an error wrapping store.ErrCodeTaken.
func WriteCodes(inserted []store.Issue, insert func([]CodeRow) ([]string, error)) error {
	var rows []CodeRow
	for _, is := range inserted {
		if is.Grant.Code != "" {
			rows = append(rows, CodeRow{Issue: is, Code: is.Grant.Code})
		}
	}
	for attempt := 1; len(rows) > 0; attempt++ {
		written, err := insert(rows)
		if err != nil {
			return err
		}
		done := make(map[string]bool, len(written))
		for _, id := range written {
			done[id] = true
		}
		again := rows[:0]
		for _, r := range rows {
			if done[r.Issue.ClaimID] {
				continue
			}
			if r.Issue.Grant.NewCode == nil || attempt >= store.MaxCodeAttempts {
				return fmt.Errorf("claim %s: %w (%d attempts)", r.Issue.ClaimID, store.ErrCodeTaken, attempt)
			}
			if r.Code, err = r.Issue.Grant.NewCode(); err != nil {
				return fmt.Errorf("claim %s: new code: %w", r.Issue.ClaimID, err)
			}
			again = append(again, r)
		}
		rows = again
	}
	return nil
}

// Credits returns the inserted issues that credit points: the ledger
// entries to write.
func Credits(inserted []store.Issue) []store.Issue {
	var out []store.Issue
	for _, is := range inserted {
		if is.Grant.Points != 0 {
			out = append(out, is)
		}
	}
	return out
}

// IssuedCols is the column list ListIssued and IssuedByRank select from
// issued i LEFT JOIN codes c LEFT JOIN code_pool p LEFT JOIN ledger l (all
// on claim_id), in the order [ScanIssued] reads. A claim's code is in codes
// or, taken from an uploaded pool, in code_pool.
const IssuedCols = `i.claim_id, i.promotion_id, i.user_id, i.rank, i.slot, i.accepted_at, i.issued_at,
	COALESCE(c.code, p.code, ''), COALESCE(c.value, p.value, 0), c.expires_at, COALESCE(l.amount, 0),
	i.revoked_at, i.revoke_returned`

// IssuedFrom is the FROM clause that goes with [IssuedCols].
const IssuedFrom = `issued i LEFT JOIN codes c ON c.claim_id = i.claim_id
	LEFT JOIN code_pool p ON p.claim_id = i.claim_id LEFT JOIN ledger l ON l.claim_id = i.claim_id`

// PoolIssues splits the inserted issues whose Grant asks for a pool code
// by promotion, in batch order: the codes to take from each pool.
func PoolIssues(inserted []store.Issue) map[string][]store.Issue {
	var out map[string][]store.Issue
	for _, is := range inserted {
		if !is.Grant.Pool {
			continue
		}
		if out == nil {
			out = map[string][]store.Issue{}
		}
		out[is.PromotionID] = append(out[is.PromotionID], is)
	}
	return out
}

// TakePoolCodes gives each inserted issue that asks for a pool code one
// from its promotion's pool, or, if the promotion has no pool, leaves its
// Grant.Code to be written as usual; it returns the issues whose codes
// WriteCodes still writes. hasPool reports whether a promotion has a pool;
// take takes up to len(issues) free codes of one promotion's pool for the
// first issues and returns the claim ids it served, and is called again for
// the rest until it serves none: then the pool is dry, an error wrapping
// store.ErrPoolEmpty.
func TakePoolCodes(inserted []store.Issue, hasPool func(promotionID string) (bool, error),
	take func(promotionID string, issues []store.Issue) ([]string, error)) ([]store.Issue, error) {
	byPromo := PoolIssues(inserted)
	if len(byPromo) == 0 {
		return inserted, nil
	}
	pooled := map[string]bool{}
	for id, issues := range byPromo {
		ok, err := hasPool(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		for len(issues) > 0 {
			served, err := take(id, issues)
			if err != nil {
				return nil, err
			}
			if len(served) == 0 {
				return nil, fmt.Errorf("claim %s: promotion %s: %w", issues[0].ClaimID, id, store.ErrPoolEmpty)
			}
			done := make(map[string]bool, len(served))
			for _, c := range served {
				done[c] = true
				pooled[c] = true
			}
			rest := issues[:0:0]
			for _, is := range issues {
				if !done[is.ClaimID] {
					rest = append(rest, is)
				}
			}
			issues = rest
		}
	}
	rest := make([]store.Issue, 0, len(inserted))
	for _, is := range inserted {
		if !pooled[is.ClaimID] {
			rest = append(rest, is)
		}
	}
	return rest, nil
}
