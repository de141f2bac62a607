package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// issuer is the stream handler of one promotion's pool: it asks the
// promotion kind's issue.Issuer for each claim's grant, then writes the
// claims of one read as issued rows, with their grants, in one database
// transaction. Unique keys make a redelivered claim a Duplicate, which is
// done and keeps the grant written first; a Conflict (another claim holds
// the rank or the user's slot) is permanent.
type issuer struct {
	*issuing
	promotionID string
	// keyID names the Redis keys of the stream the issuer's pool reads
	// (the promotion's own, or one of its segments').
	keyID string
	promo store.Promotion
	// segmented: the promotion has segments, whose ranks no rebuild
	// restores; a conflict is a dead letter (see conflict).
	segmented bool
}

// issuing is what every promotion's issuer works with: the database,
// the gate, the fences and the rate meter it feeds, and the parts it
// hands a claim to (the waker, the loop client, the dead letters).
type issuing struct {
	st     store.Store
	gate   *claim.Gate
	cfg    Config
	log    *slog.Logger
	rates  *rateMeter
	fences *fences
	wk     *waker
	lc     *loopClient
	dl     *deadLetters
}

// Handle implements stream.Handler: it issues msgs, telling
// Config.OnHandling what the consumer holds before and after.
func (h *issuer) Handle(ctx context.Context, msgs []stream.Message) (errs []error) {
	if done := h.reportHandling(ctx, msgs); done != nil {
		defer func() { done(errs) }()
	}
	return h.handle(ctx, msgs)
}

// reportHandling has Config.OnHandling told that the consumer of ctx takes
// msgs, and returns the report to make once the issuer answered them. Nil
// when there is no hook.
func (h *issuer) reportHandling(ctx context.Context, msgs []stream.Message) func(errs []error) {
	report := h.cfg.OnHandling
	if report == nil {
		return nil
	}
	consumer := h.keyID + "/" + stream.ConsumerFromContext(ctx)
	report(h.promotionID, consumer, Handling{Oldest: oldestAccepted(msgs, nil)})
	reclaim := h.cfg.Stream.ReclaimMinIdle
	if reclaim <= 0 {
		reclaim = stream.DefaultReclaimMinIdle
	}
	return func(errs []error) { report(h.promotionID, consumer, settled(msgs, errs, reclaim)) }
}

// handle issues msgs.
func (h *issuer) handle(ctx context.Context, msgs []stream.Message) []error {
	errs := make([]error, len(msgs))
	decoded := make([]store.Issue, len(msgs))
	for i, msg := range msgs {
		is, err := decodeIssue(h.promotionID, msg.Fields)
		if err != nil {
			errs[i] = stream.Malformed(err)
			continue
		}
		decoded[i] = is
	}
	h.grants(ctx, decoded, errs)
	issues := make([]store.Issue, 0, len(msgs))
	at := make([]int, 0, len(msgs)) // index in msgs of each issue
	for i, is := range decoded {
		if errs[i] == nil {
			issues = append(issues, is)
			at = append(at, i)
		}
	}
	if len(issues) == 0 {
		return errs
	}
	start := time.Now()
	outs, err := h.st.IssueBatch(ctx, issues)
	if err == nil {
		h.rates.observe(len(issues), time.Since(start))
	}
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
		err = storeErr(err)
		for _, i := range at {
			errs[i] = err
		}
		return errs
	}
	inserted := 0
	for j, o := range outs {
		if errs[at[j]] != nil {
			continue // issued one by one, and failed: its error is set
		}
		switch o {
		case store.Inserted:
			inserted++
			h.fences.raise(h.promotionID, issues[j].Rank)
		case store.Duplicate:
			h.fences.raise(h.promotionID, issues[j].Rank)
		default:
			errs[at[j]] = h.conflict(ctx, issues[j])
		}
	}
	if inserted > 0 && h.cfg.OnIssued != nil {
		h.cfg.OnIssued(h.promotionID, inserted)
	}
	return errs
}

// grants sets the Grant of each issue whose errs entry is nil, or its
// error. An issuer that calls out (issue.Concurrent) is asked for up to
// its Concurrency claims at a time, each goroutine writing only its own
// entries; the others are asked in turn.
func (h *issuer) grants(ctx context.Context, issues []store.Issue, errs []error) {
	n := 1
	if c, ok := h.cfg.Issuers[h.promo.Kind].(issue.Concurrent); ok {
		n = max(c.Concurrency(), 1)
	}
	one := func(i int) {
		issues[i].Grant, errs[i] = h.grant(ctx, issues[i])
	}
	if n == 1 {
		for i := range issues {
			if errs[i] == nil {
				one(i)
			}
		}
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, n)
	for i := range issues {
		if errs[i] != nil {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			one(i)
		})
	}
	wg.Wait()
}

// grant asks the promotion kind's issuer what the claim receives. A kind
// without an issuer is a permanent failure; the issuer's own errors keep
// their kind (stream.Transient, stream.Permanent).
func (h *issuer) grant(ctx context.Context, is store.Issue) (store.Grant, error) {
	iss := h.cfg.Issuers[h.promo.Kind]
	if iss == nil {
		return store.Grant{}, stream.Permanent(fmt.Errorf("claim %s: no issuer for kind %q", is.ClaimID, h.promo.Kind))
	}
	g, err := iss.Grant(ctx, h.promo, is)
	if err != nil {
		return store.Grant{}, fmt.Errorf("claim %s: issue %s: %w", is.ClaimID, h.promo.Kind, err)
	}
	return g, nil
}

// conflict settles a claim the database refused because another claim
// holds its rank or its user's slot. Outside a loss of Redis's history that
// is an entry no claim script wrote, or a claim an admin voided: a
// permanent failure. After a loss it is a rank or a slot handed out twice,
// and it is made harmless rather than dead-lettered:
//
//   - another user's claim holds the rank: the claim gets a new rank, once
//     the promotion is rebuilt (a transient error until then), keeping its
//     user and slot; with no stock left for it, it is dead-lettered with a
//     reason that says what happened, for an admin to see;
//   - the user already holds an issued claim in that slot (Redis forgot the
//     user's count, and the user claimed again): the claim resolves to the
//     issued one. Its unit goes back to stock, recorded as a voided dead
//     letter that says why — unless its rank is another user's too, in
//     which case it never held a unit of its own.
//
// A nil error means the entry is settled and may be acknowledged.
func (h *issuer) conflict(ctx context.Context, is store.Issue) error {
	id := h.promotionID
	if h.segmented {
		return stream.Permanent(fmt.Errorf("claim %s conflicts with an issued or voided claim holding its rank or slot (a promotion with segments is not re-ranked)", is.ClaimID))
	}
	issued, err := h.st.ListIssued(ctx, id, is.UserID)
	if err != nil {
		return storeErr(err)
	}
	held, err := h.st.ClaimsByRank(ctx, id, is.Rank-1, 1)
	if err != nil {
		return storeErr(err)
	}
	rankTaken := len(held) == 1 && held[0].Rank == is.Rank && held[0].UserID != is.UserID
	slotTaken := slices.ContainsFunc(issued, func(x store.Issued) bool { return x.Slot == is.Slot && x.ClaimID != is.ClaimID })
	if rankTaken || slotTaken {
		// Proof that Redis lost writes: settle it only on counters rebuilt
		// since the claim was accepted.
		if err := h.gate.Collided(ctx, id, is.AcceptedAt); err != nil {
			return h.waitForRebuild(is, err)
		}
	}
	for _, x := range issued {
		if x.Slot != is.Slot || x.ClaimID == is.ClaimID {
			continue
		}
		if rankTaken {
			h.log.Warn("claim settled: its user already holds an issued claim in its slot, and its rank is another user's; Redis lost writes",
				"promotion", id, "claim_id", is.ClaimID, "user", is.UserID, "issued_claim_id", x.ClaimID)
			return nil
		}
		return h.resolveToIssued(ctx, is, x)
	}
	if !rankTaken {
		return stream.Permanent(fmt.Errorf("claim %s conflicts with an issued or voided claim holding its rank or slot", is.ClaimID))
	}
	floors, err := h.st.MaxRanks(ctx, []string{id})
	if err != nil {
		return storeErr(err)
	}
	fence := max(floors[id], h.fences.get(id))
	rank, fresh, err := h.gate.Rerank(ctx, id, is.Rank, is.UserID, is.Slot, is.AcceptedAt, fence)
	switch {
	case errors.Is(err, claim.ErrRebuilding):
		return h.waitForRebuild(is, err)
	case errors.Is(err, claim.ErrNoStockToRerank):
		return stream.Permanent(fmt.Errorf("claim %s: rank %d was handed out twice after Redis lost writes (the database holds it for another user), and no stock is left to give this claim a new rank", is.ClaimID, is.Rank))
	case err != nil:
		return err
	}
	if fresh {
		h.log.Warn("claim re-ranked: Redis lost writes and handed its rank out twice",
			"promotion", id, "user", is.UserID, "old_rank", is.Rank, "rank", rank)
		h.wk.wakePool(id)
	}
	return nil
}

// waitForRebuild asks for the rebuild a collision needs and keeps the
// claim pending until it is done: a transient error, which never counts
// towards the dead letters.
func (h *issuer) waitForRebuild(is store.Issue, err error) error {
	if errors.Is(err, claim.ErrRebuilding) {
		h.lc.reportLost(h.promotionID)
		return stream.Transient(fmt.Errorf("claim %s: rank %d or its slot was handed out twice; waiting for the promotion to be rebuilt: %w", is.ClaimID, is.Rank, err))
	}
	return err
}

// resolveToIssued settles a claim whose user already holds x, an issued
// claim in the same slot: the user keeps x, and the claim's unit goes back
// to stock through the dead-letter void, so the database records why.
func (h *issuer) resolveToIssued(ctx context.Context, is store.Issue, x store.Issued) error {
	id := h.promotionID
	claimID, err := h.dl.recordDeadLetter(ctx, store.DeadLetter{
		ClaimID: is.ClaimID, PromotionID: id, UserID: is.UserID, Rank: is.Rank, Slot: is.Slot,
		Reason: fmt.Sprintf("the user already holds issued claim %s in slot %d (Redis lost writes); this claim's unit went back to stock", x.ClaimID, x.Slot),
		State:  store.DeadFailed, At: h.cfg.Now().UTC(),
	})
	if err != nil {
		return storeErr(err)
	}
	if _, err := h.dl.void(ctx, id, []string{claimID}); err != nil {
		return storeErr(err)
	}
	h.log.Warn("claim resolved to the user's issued claim: Redis lost writes and the user claimed again",
		"promotion", id, "claim_id", is.ClaimID, "issued_claim_id", x.ClaimID)
	return nil
}

// storeErr marks a database outage transient, and a dry code pool
// permanent: the claim cannot be issued without a code.
func storeErr(err error) error {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return stream.Transient(err)
	case errors.Is(err, store.ErrPoolEmpty):
		return stream.Permanent(fmt.Errorf("%w: upload more codes, then replay the claim", err))
	}
	return err
}

// kindIssued refuses to create a promotion of a kind this manager has no
// issuer for (a webhook promotion on a server without a webhook secret):
// its claims could never be issued.
func kindIssued(issuers issue.Kinds, kind string) error {
	if issuers[kind] != nil {
		return nil
	}
	if kind == KindWebhook {
		return invalid("kind", "this server issues no webhook promotions: it has no webhook signing secret (issue.webhook_secret or DIBS_WEBHOOK_SECRET)")
	}
	return invalid("kind", "this server has no issuer for kind %s", kind)
}

// oneByOne issues each claim in its own transaction. It returns the
// outcome of each one issued and sets errs for the others: a claim whose
// error is set has no outcome.
func (h *issuer) oneByOne(ctx context.Context, issues []store.Issue, at []int, errs []error) []store.Outcome {
	outs := make([]store.Outcome, len(issues))
	for j, is := range issues {
		o, err := h.st.IssueBatch(ctx, []store.Issue{is})
		switch {
		case err == nil && len(o) == 1:
			outs[j] = o[0]
		case err == nil:
			errs[at[j]] = fmt.Errorf("issue %s: %d outcomes for one claim", is.ClaimID, len(o))
		default:
			errs[at[j]] = storeErr(err)
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
