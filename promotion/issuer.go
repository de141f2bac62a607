package promotion

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// issuer is the stream handler of one promotion's pool: it writes the claims
// of one read as issued rows in one database transaction. Unique keys make a
// redelivered claim a Duplicate, which is done; a Conflict (another claim
// holds the rank or the user's slot) is permanent.
type issuer struct {
	m           *Manager
	promotionID string
}

// Handle implements stream.Handler.
func (h *issuer) Handle(ctx context.Context, msgs []stream.Message) []error {
	errs := make([]error, len(msgs))
	issues := make([]store.Issue, 0, len(msgs))
	at := make([]int, 0, len(msgs)) // index in msgs of each issue
	for i, msg := range msgs {
		is, err := decodeIssue(h.promotionID, msg.Fields)
		if err != nil {
			errs[i] = stream.Malformed(err)
			continue
		}
		issues = append(issues, is)
		at = append(at, i)
	}
	if len(issues) == 0 {
		return errs
	}
	outs, err := h.m.st.IssueBatch(ctx, issues)
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil) {
		// The database did not answer within the handler's deadline: it is
		// overloaded or stalled, not refusing these claims. Retrying must
		// not march them towards the dead letters.
		err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if err != nil && !errors.Is(err, store.ErrUnavailable) && len(issues) > 1 {
		// The batch failed as a whole for a reason other than an outage:
		// issue one by one, so one bad entry never fails the good ones.
		outs, err = h.oneByOne(ctx, issues, at, errs), nil
	}
	if err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			err = stream.Transient(err)
		}
		for _, i := range at {
			errs[i] = err
		}
		return errs
	}
	inserted := 0
	for j, o := range outs {
		switch o {
		case store.Inserted:
			inserted++
		case store.Duplicate, 0: // 0: failed one by one, error already set
		default:
			errs[at[j]] = stream.Permanent(fmt.Errorf("claim %s conflicts with an issued claim holding its rank or slot", issues[j].ClaimID))
		}
	}
	if inserted > 0 && h.m.cfg.OnIssued != nil {
		h.m.cfg.OnIssued(h.promotionID, inserted)
	}
	return errs
}

// oneByOne issues each claim in its own transaction. It sets errs for the
// claims that fail and returns their outcomes (0 where it failed).
func (h *issuer) oneByOne(ctx context.Context, issues []store.Issue, at []int, errs []error) []store.Outcome {
	outs := make([]store.Outcome, len(issues))
	for j, is := range issues {
		o, err := h.m.st.IssueBatch(ctx, []store.Issue{is})
		switch {
		case err == nil && len(o) == 1:
			outs[j] = o[0]
		case err == nil:
			errs[at[j]] = fmt.Errorf("issue %s: %d outcomes for one claim", is.ClaimID, len(o))
		case errors.Is(err, store.ErrUnavailable):
			errs[at[j]] = stream.Transient(err)
		default:
			errs[at[j]] = err
		}
	}
	return outs
}

// decodeIssue turns a stream entry into an Issue; an error means the entry is malformed.
func decodeIssue(promotionID string, f map[string]string) (store.Issue, error) {
	is := store.Issue{PromotionID: promotionID, ClaimID: f["claim_id"], UserID: f["user"]}
	if is.ClaimID == "" {
		return is, errors.New("missing claim_id")
	}
	if !ValidID(is.UserID) {
		return is, fmt.Errorf("bad user %q", is.UserID)
	}
	var err error
	if is.Rank, err = strconv.ParseInt(f["rank"], 10, 64); err != nil || is.Rank < 1 {
		return is, fmt.Errorf("bad rank %q", f["rank"])
	}
	if is.Slot, err = strconv.Atoi(f["slot"]); err != nil || is.Slot < 1 {
		return is, fmt.Errorf("bad slot %q", f["slot"])
	}
	ms, err := strconv.ParseInt(f["at"], 10, 64)
	if err != nil {
		return is, fmt.Errorf("bad at %q", f["at"])
	}
	is.AcceptedAt = time.UnixMilli(ms).UTC()
	return is, nil
}
