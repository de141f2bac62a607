package bench

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// After the run: the promotion as the server reports it, the wait until
// every accepted claim is confirmed, and the spot check of users' claims.

// promotionView is the part of a promotion the bench reads.
type promotionView struct {
	ID          string
	State       string
	Counts      Counts
	WaitingRoom RoomCounts
}

func (r *runner) getPromotion(ctx context.Context) (promotionView, error) {
	p, err := r.api.GetPromotion(ctx, r.cfg.PromotionID)
	if err != nil {
		return promotionView{}, opError("get promotion", err)
	}
	v := promotionView{ID: p.ID, State: p.State,
		Counts: Counts{Accepted: p.Counts.Accepted, Pending: p.Counts.Pending, Issued: p.Counts.Issued, Failed: p.Counts.Failed},
		WaitingRoom: RoomCounts{Waiting: p.WaitingRoom.Waiting, Admitted: p.WaitingRoom.Admitted,
			PassesSpent: p.WaitingRoom.PassesSpent, Abandoned: p.WaitingRoom.Abandoned}}
	if p.Counts.Remaining != nil {
		v.Counts.Remaining = *p.Counts.Remaining
	}
	return v, nil
}

// confirmation is how the wait for issuance ended.
type confirmation struct {
	counts    Counts        // the last counts read
	room      RoomCounts    // the last waiting-room counts read
	known     bool          // counts were read at least once
	allIssued bool          // every accepted claim issued, none failed
	timedOut  bool          // gave up with claims still pending
	after     time.Duration // from the end of the claims to the last read
}

// confirm polls the promotion until nothing is pending, or the confirmation
// timeout passes. Failing reads are retried until the timeout: the server
// may be busy, and the report says what was last seen.
func (r *runner) confirm(ctx context.Context, since time.Time) (confirmation, error) {
	var c confirmation
	fmt.Fprintf(r.cfg.Progress, "waiting up to %s for every accepted claim to be issued\n", r.cfg.ConfirmTimeout)
	deadline := time.NewTimer(r.cfg.ConfirmTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(max(r.cfg.PollInterval, time.Millisecond))
	defer tick.Stop()
	var lastErr error
	lastLine := time.Now()
	for {
		p, err := r.getPromotion(ctx)
		c.after = time.Since(since)
		switch {
		case err != nil:
			lastErr = err
		case p.Counts.Pending == 0:
			c.counts, c.room, c.known = p.Counts, p.WaitingRoom, true
			c.allIssued = p.Counts.Issued == p.Counts.Accepted && p.Counts.Failed == 0
			fmt.Fprintf(r.cfg.Progress, "confirmed: %d/%d issued, %d failed, %s after the last answer\n",
				p.Counts.Issued, p.Counts.Accepted, p.Counts.Failed, human(c.after))
			return c, nil
		default:
			c.counts, c.room, c.known = p.Counts, p.WaitingRoom, true
			if time.Since(lastLine) >= time.Second {
				lastLine = time.Now()
				fmt.Fprintf(r.cfg.Progress, "confirming: %d/%d issued, %d pending (%s)\n",
					p.Counts.Issued, p.Counts.Accepted, p.Counts.Pending, human(c.after))
			}
		}
		select {
		case <-ctx.Done():
			return c, fmt.Errorf("wait for confirmation: %w", ctx.Err())
		case <-deadline.C:
			c.timedOut = true
			c.after = time.Since(since)
			msg := fmt.Sprintf("confirmation timed out after %s: %d/%d issued, %d pending, %d failed",
				r.cfg.ConfirmTimeout, c.counts.Issued, c.counts.Accepted, c.counts.Pending, c.counts.Failed)
			if !c.known && lastErr != nil {
				msg = fmt.Sprintf("confirmation timed out after %s: %v", r.cfg.ConfirmTimeout, lastErr)
			}
			fmt.Fprintln(r.cfg.Progress, msg)
			return c, nil
		case <-tick.C:
		}
	}
}

// claimStatus is the answer of GET /v1/promotions/{id}/claims/{user}.
type claimStatus struct {
	Status string `json:"status"`
	Claims []struct {
		ClaimID string `json:"claim_id"`
		Rank    int64  `json:"rank"`
		Status  string `json:"status"`
	} `json:"claims"`
}

// spotCheck reads back the claim status of up to cfg.SpotChecks users, half
// of them users that were accepted (they must show every claim they got,
// issued) and half users that got nothing (they must show none), picked
// evenly across the user numbers so every wave is represented.
func (r *runner) spotCheck(ctx context.Context, accepted []acceptance) ([]spotResult, error) {
	got := map[int][]acceptance{}
	for _, a := range accepted {
		got[a.user] = append(got[a.user], a)
	}
	var withClaims, without []int
	for u := range r.cfg.Users {
		if _, ok := got[u]; ok {
			withClaims = append(withClaims, u)
		} else {
			without = append(without, u)
		}
	}
	half := (r.cfg.SpotChecks + 1) / 2
	var users []int
	users = append(users, spread(withClaims, half)...)
	users = append(users, spread(without, r.cfg.SpotChecks-min(half, len(withClaims)))...)

	out := make([]spotResult, 0, len(users))
	for _, u := range users {
		res := spotResult{user: r.userID(u), accepted: len(got[u]) > 0}
		st, err := r.api.ClaimStatus(ctx, r.cfg.PromotionID, res.user)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("spot check: %w", ctx.Err())
		}
		if err != nil {
			res.problem = opError("claim status", err).Error()
			out = append(out, res)
			continue
		}
		cs := claimStatus{Status: st.Status}
		for _, c := range st.Claims {
			cs.Claims = append(cs.Claims, struct {
				ClaimID string `json:"claim_id"`
				Rank    int64  `json:"rank"`
				Status  string `json:"status"`
			}{c.ClaimID, c.Rank, c.Status})
		}
		res.wantOK, res.problem = compareStatus(cs, got[u])
		out = append(out, res)
	}
	return out, nil
}

// compareStatus checks a user's claim status against the claims the user
// was answered 202 for: exactly those, each issued; or none at all.
func compareStatus(cs claimStatus, want []acceptance) (bool, string) {
	if len(want) == 0 {
		if cs.Status != "none" || len(cs.Claims) != 0 {
			return false, fmt.Sprintf("status %q with %d claims, want none", cs.Status, len(cs.Claims))
		}
		return true, ""
	}
	if cs.Status != "issued" {
		return false, fmt.Sprintf("status %q, want issued", cs.Status)
	}
	if len(cs.Claims) != len(want) {
		return false, fmt.Sprintf("%d claims, want %d", len(cs.Claims), len(want))
	}
	have := map[int64]string{}
	for _, c := range cs.Claims {
		if c.Status != "issued" {
			return false, fmt.Sprintf("claim rank %d is %q, want issued", c.Rank, c.Status)
		}
		have[c.Rank] = c.ClaimID
	}
	for _, a := range want {
		id, ok := have[a.rank]
		if !ok || id != a.claimID {
			return false, fmt.Sprintf("claim %s (rank %d) missing", a.claimID, a.rank)
		}
	}
	return true, ""
}

// spread picks up to n elements of xs, evenly spaced, in order.
func spread(xs []int, n int) []int {
	if n <= 0 || len(xs) == 0 {
		return nil
	}
	if n >= len(xs) {
		return xs
	}
	out := make([]int, 0, n)
	for i := range n {
		out = append(out, xs[i*len(xs)/n])
	}
	sort.Ints(out)
	return out
}
