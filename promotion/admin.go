package promotion

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
)

// ErrNotEnded means the call needs an ended promotion (closed, or past
// ends_at) and this one is not: archiving a promotion still scheduled or
// open.
var ErrNotEnded = errors.New("promotion: not ended")

// ErrBadQuery means a ListQuery names an unknown state or sort, or carries
// a cursor of another sort.
var ErrBadQuery = errors.New("promotion: bad list query")

// List filters beyond the states: StateClosed (closed by an admin, shown as
// StateEnded) and StateArchived (archived, whatever the state).
const (
	StateClosed   = "closed"
	StateArchived = "archived"
)

// Sort orders of ListQuery.
const (
	SortID            = store.SortID
	SortCreatedAt     = store.SortCreatedAt
	SortCreatedAtDesc = store.SortCreatedAtDesc
)

// ListScanLimit bounds the promotions one ListBy call reads from the
// database to fill a page, when the state is one the database cannot
// filter alone (open, sold_out): past it the page is answered short, with
// a cursor to go on from.
const ListScanLimit = 2000

// ListQuery selects promotions for Manager.ListBy.
type ListQuery struct {
	// State is "" (every promotion not archived), StateScheduled,
	// StateOpen, StateSoldOut, StateEnded, StateClosed or StateArchived.
	State string
	// Sort is SortID, SortCreatedAt or SortCreatedAtDesc.
	Sort string
	// Cursor is "" or the Next of the previous page, for the same State
	// and Sort.
	Cursor string
	// Limit bounds the promotions returned.
	Limit int
}

// Store is the database the Manager runs on, for the operators' reads and
// writes that need no Redis (audit log, admin tokens, winners, erasure).
func (m *Manager) Store() store.Store { return m.st }

// ListBy returns a page of promotions matching q, and the cursor of the
// next page ("" on the last). The database filters what it can (the
// window's phase, closed, archived, the order and the cursor); open and
// sold_out need Redis's counts, so those are checked per promotion, reading
// at most ListScanLimit rows: a page may then hold fewer than q.Limit
// promotions and still have a next one.
func (m *Manager) ListBy(ctx context.Context, q ListQuery) ([]View, string, error) {
	sq := store.PromotionQuery{Sort: q.Sort, Now: m.cfg.Now().UTC(), Limit: q.Limit}
	var keep func(View) bool
	switch q.State {
	case "":
	case StateScheduled, StateEnded:
		sq.Phase = q.State
		keep = func(v View) bool { return v.State == q.State }
	case StateOpen, StateSoldOut:
		sq.Phase = store.PhaseLive
		keep = func(v View) bool { return v.State == q.State }
	case StateClosed:
		sq.Phase = store.PhaseClosed
	case StateArchived:
		sq.Archived = store.ArchivedOnly
	default:
		return nil, "", fmt.Errorf("%w: unknown state %q", ErrBadQuery, q.State)
	}
	if err := parseListCursor(q.Sort, q.Cursor, &sq); err != nil {
		return nil, "", err
	}
	if q.Limit <= 0 {
		return nil, "", nil
	}
	var out []View
	for scanned := 0; ; {
		ps, err := m.st.ListPromotionsBy(ctx, sq)
		if err != nil {
			return nil, "", domainErr(err)
		}
		for i, sp := range ps {
			v, err := m.vw.view(ctx, fromStore(sp))
			if err != nil {
				return nil, "", domainErr(err)
			}
			scanned++
			if keep == nil || keep(v) {
				out = append(out, v)
			}
			last := i == len(ps)-1
			if len(out) == q.Limit || (scanned >= ListScanLimit && !last) {
				// Stop here; a next page goes on after this one, unless
				// this was the database's last row.
				if last && len(ps) < sq.Limit {
					return out, "", nil
				}
				return out, listCursor(q.Sort, sp), nil
			}
		}
		if len(ps) < sq.Limit {
			return out, "", nil
		}
		if scanned >= ListScanLimit {
			return out, listCursor(q.Sort, ps[len(ps)-1]), nil
		}
		sq.AfterID, sq.AfterCreatedAt = ps[len(ps)-1].ID, ps[len(ps)-1].CreatedAt
	}
}

// listCursor is the cursor after p in sort's order: the id alone for SortID
// (as the id-ordered list always had), else "<created_at in Unix
// microseconds>/<id>".
func listCursor(sort string, p store.Promotion) string {
	if sort == SortID {
		return p.ID
	}
	return strconv.FormatInt(p.CreatedAt.UnixMicro(), 10) + "/" + p.ID
}

// parseListCursor sets sq's cursor from one listCursor made.
func parseListCursor(sort, cursor string, sq *store.PromotionQuery) error {
	switch sort {
	case SortID:
		sq.AfterID = cursor
		return nil
	case SortCreatedAt, SortCreatedAtDesc:
	default:
		return fmt.Errorf("%w: unknown sort %q", ErrBadQuery, sort)
	}
	if cursor == "" {
		return nil
	}
	at, id, ok := strings.Cut(cursor, "/")
	us, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || !ValidID(id) {
		return fmt.Errorf("%w: the cursor is not one of this sort", ErrBadQuery)
	}
	sq.AfterID, sq.AfterCreatedAt = id, time.UnixMicro(us).UTC()
	return nil
}

// Archive archives an ended promotion (closed, or past ends_at): it leaves
// the default list and stays readable by id. Archiving twice keeps the
// first time. A promotion not ended yet gets ErrNotEnded.
func (m *Manager) Archive(ctx context.Context, id string) (View, error) {
	p, err := load(ctx, m.st, id)
	if err != nil {
		return View{}, err
	}
	if !p.ended(m.cfg.Now()) {
		return View{}, ErrNotEnded
	}
	sp, err := m.st.ArchivePromotion(ctx, id, m.cfg.Now().UTC())
	if err != nil {
		return View{}, domainErr(err)
	}
	v, err := m.vw.view(ctx, fromStore(sp))
	return v, domainErr(err)
}

// DeadLetters lists up to limit of the promotion's failed claims with
// claim id > after, ordered by claim id.
func (m *Manager) DeadLetters(ctx context.Context, id, after string, limit int) ([]DeadLetter, error) {
	if _, err := load(ctx, m.st, id); err != nil {
		return nil, err
	}
	ds, err := m.st.ListDeadLetters(ctx, id, after, limit)
	if err != nil {
		return nil, domainErr(err)
	}
	out := make([]DeadLetter, len(ds))
	for i, d := range ds {
		out[i] = deadLetterFromStore(d)
	}
	return out, nil
}

// Replay puts failed claims back into the pipeline under their own claim
// ids (all failed claims when claimIDs is nil) and returns how many it
// replayed. A claim moves from failed to replayed in the database first, so
// concurrent replays and voids never act on one claim twice; the rest of the
// work is finished even if ctx ends (see the sweep).
func (m *Manager) Replay(ctx context.Context, id string, claimIDs []string) (int, error) {
	n, err := m.dl.replay(ctx, id, claimIDs)
	return n, domainErr(err)
}

// Void gives up on failed claims and returns their units to stock. It
// returns how many were voided. A claim the database holds as issued is
// never voided.
func (m *Manager) Void(ctx context.Context, id string, claimIDs []string) (int, error) {
	return m.dl.void(ctx, id, claimIDs)
}

// Rebuild marks the promotion rebuilding (its claims wait), rebuilds its
// Redis counters from the database and lets claims go on, now, and reports
// what it did (an operator's repair tool; the Manager rebuilds by itself
// when it detects a loss). It
// also lifts a halt (see Config.OnHalted): the operator accepts the
// database as what claims go on from. It returns ErrRebuildBusy if a
// rebuild of it runs elsewhere or in this process, or if the Manager was
// stopped.
func (m *Manager) Rebuild(ctx context.Context, id string) (RebuildReport, error) {
	p, err := load(ctx, m.st, id)
	if err == nil && p.segmented() {
		err = errSegmented("a rebuild")
	}
	if err != nil {
		return RebuildReport{PromotionID: id, Err: err}, err
	}
	rbCtx, ok := m.rb.begin(id)
	if !ok {
		rep := RebuildReport{PromotionID: id, Reason: reasonRequested, Err: claim.ErrRebuildBusy}
		return rep, rep.Err
	}
	defer m.rb.end(id)
	// Stop must not wait for the caller's deadline: it ends this rebuild too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(rbCtx, cancel)()
	rep := m.rb.rebuild(ctx, p, reasonRequested, false)
	rep.Err = domainErr(rep.Err)
	return rep, rep.Err
}

// Revoke revokes issued claims of the promotion: each one's status becomes
// StatusRevoked, its code is no longer valid, its points are debited, the
// issuer's undo runs (an issue.Revoker, for issuers that call out), and,
// if the promotion's RevokeReturnsStock is set, its unit goes back to
// stock the way a void gives one back (never in a promotion with a code
// pool: the claim's code is spent, and a unit given back would have none). Claims not issued are skipped and
// reported.
//
// Like a dead-letter transition it is decided in the database (one
// transaction marks the claims revoked, with their codes and points, so a
// claim is revoked once however often or concurrently this is called) and
// then applied outside it (Redis's status and stock, the issuer's undo);
// the rest is finished even if ctx ends, and a revoke whose outside steps
// are not recorded as done is applied again by the re-check loop's sweep.
// A failing undo is no error of Revoke: the claim is revoked, reported in
// Pending, and its undo (then its Redis step) is retried by the sweep. An
// undo the other system refused (an error wrapping stream.ErrPermanent,
// such as a webhook's 400) is final: the claim stays revoked, the refusal
// is reported in Refused and logged with the answer, and it is not tried
// again (a refusal repeats; the partner's operator settles it by hand).
// The revoke's claim.revoked events are written with its database
// transaction.
func (m *Manager) Revoke(ctx context.Context, id string, claimIDs []string) (Revoked, error) {
	return m.rv.revoke(ctx, id, claimIDs)
}

// Patch changes a running promotion.
//
// The database is the truth and the re-check repairs Redis from it, so
// the order of the writes makes every crash end with the two agreeing on a
// value that never oversells:
//
// A promotion with a code pool holds min(stock, codes) in Redis (see
// AddCodes): a raise of its stock above the pool's codes is refused
// (a *NotEnoughCodesError, nothing changed).
//
//  1. Redis, one script: the promotion's change lease is taken, and a
//     lowered stock is applied at once, refused (ErrStockBelowAccepted,
//     nothing changed anywhere) if it is below the claims accepted, read
//     from the live rank counter in the same step;
//  2. the database: every field, in one transaction with its
//     promotion.changed event (none if nothing changed);
//  3. Redis, one script: stock (a raise is applied only now, after the
//     database holds it), end and pause are applied and the lease given up.
//
// A crash after 1 leaves Redis's stock at most lower than the database's,
// which the re-check raises back once the lease expired; a crash after 2
// leaves the database ahead, which the re-check applies. So Redis's stock
// is above the database's only between 2 and 3, and the database never
// holds a stock below what Redis accepted. Concurrent changes of one
// promotion wait for each other (ErrChangeBusy) and so do the re-check's
// repairs. The claim scripts read stock, end and pause from Redis on every
// claim, so once Patch returns every instance's next claim sees the change;
// a hint (hint.Changed) tells the other instances to drop anything they
// cached about the promotion.
//
// A grant promotion's name and end may change; its stock (the expected
// target count), its pause and revoke_returns_stock may not (a
// ValidationError naming the field).
func (m *Manager) Patch(ctx context.Context, id string, c Change) (View, error) {
	v, _, err := m.PatchChanged(ctx, id, c)
	return v, err
}

// PatchChanged is Patch that also returns the fields whose value the
// change changed, by the names the promotion.changed event gives them
// (name, stock, ends_at, paused, revoke_returns_stock,
// waiting_room.admit_per_second, waiting_room.max_active,
// waiting_room.message, waiting_room.pow_difficulty, waiting_room.page), in
// that order: none
// for a change that found every value as it was already.
func (m *Manager) PatchChanged(ctx context.Context, id string, c Change) (View, []string, error) {
	sp, err := m.st.GetPromotion(ctx, id)
	if err != nil {
		return View{}, nil, domainErr(err)
	}
	sp2, err := m.ch.patch(ctx, sp, c)
	if err != nil {
		return View{}, nil, err
	}
	v, err := m.vw.view(ctx, fromStore(sp2))
	if err != nil {
		return View{}, nil, domainErr(err)
	}
	return v, changedFields(sp, sp2), nil
}
