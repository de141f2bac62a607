package promotion

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
			v, err := m.view(ctx, fromStore(sp))
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
	p, err := m.load(ctx, id)
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
	v, err := m.view(ctx, fromStore(sp))
	return v, domainErr(err)
}
