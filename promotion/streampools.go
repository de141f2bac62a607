package promotion

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/stream"
)

// streamPools makes the specs of the promotions' confirmation pools, which the
// stream registry runs (one per promotion, one per segment), and reads the
// backlog of their streams' issuers group.
type streamPools struct {
	client  rueidis.Client
	gate    *claim.Gate
	log     *slog.Logger
	dl      *deadLetters
	issuing *issuing
}

// spec is the confirmation pool of the stream under keyID's keys
// (promotion p's own, or one of its segments'), issuing into p. The pool's
// log lines name the promotion (and the segment).
func (ps *streamPools) spec(p Promotion, keyID string, expected int64, h *handle) stream.Spec {
	k := ps.gate.Keys(keyID)
	log := ps.log.With("promotion", p.ID)
	if keyID != p.ID {
		log = log.With("segment", keyID)
	}
	return stream.Spec{
		Logger:           log,
		Stream:           k.Stream(),
		Group:            claim.Group,
		Handler:          &liveIssuer{h: h, base: issuer{issuing: ps.issuing, promotionID: p.ID, keyID: keyID, segmented: p.segmented()}},
		Ack:              ps.acker(keyID),
		OnDeadLetter:     ps.dl.deadLettererOn(p.ID, keyID),
		DeadLetterStream: k.DeadLetters(),
		ExpectedTotal:    expected,
		Size:             func() int { return int(h.size.Load()) },
	}
}

// acker acknowledges the entries of the stream under keyID's keys once
// they are issued.
func (ps *streamPools) acker(id string) func(context.Context, []stream.Message) error {
	return func(ctx context.Context, msgs []stream.Message) error {
		entries := make([]claim.Entry, len(msgs))
		for i, msg := range msgs {
			entries[i] = claim.Entry{ID: msg.ID, Rank: msg.Fields["rank"]}
		}
		_, err := ps.gate.Ack(ctx, id, entries)
		return err
	}
}

// liveIssuer is the handler of a promotion's (or segment's) pool: the
// issuer, handed for each batch the promotion's definition as the loop last
// read it (handle.promo), so a change made while the pool runs (a rename)
// reaches what the kind's issuer sees without restarting the pool.
type liveIssuer struct {
	h    *handle
	base issuer
}

// Handle implements stream.Handler.
func (l *liveIssuer) Handle(ctx context.Context, msgs []stream.Message) []error {
	is := l.base
	is.promo = *l.h.promo.Load()
	return is.Handle(ctx, msgs)
}

// groupState is the consumer group's backlog.
type groupState struct {
	pending int64
	lag     int64 // -1 when Redis cannot tell
}

// busy reports whether the group has claims pending or not yet delivered.
func (g groupState) busy() bool { return g.pending > 0 || g.lag != 0 }

// groupWorks reads the issuers group's pending count and lag of every
// promotion in list, in one pipelined round trip (rueidis sends each command
// to its promotion's Cluster node).
func (ps *streamPools) groupWorks(ctx context.Context, list []Promotion) ([]groupState, []error) {
	works := make([]groupState, len(list))
	errs := make([]error, len(list))
	if len(list) == 0 {
		return works, errs
	}
	cmds := make(rueidis.Commands, len(list))
	for i, p := range list {
		cmds[i] = ps.client.B().XinfoGroups().Key(ps.gate.Keys(p.ID).Stream()).Build()
	}
	for i, res := range ps.client.DoMulti(ctx, cmds...) {
		works[i], errs[i] = parseGroupWork(list[i].ID, res)
	}
	return works, errs
}

// parseGroupWork reads the issuers group out of an XINFO GROUPS reply.
func parseGroupWork(id string, res rueidis.RedisResult) (groupState, error) {
	groups, err := res.ToArray()
	if err != nil {
		return groupState{}, fmt.Errorf("group state of %s: %w", id, err)
	}
	for _, g := range groups {
		fields, err := g.AsMap()
		if err != nil {
			continue
		}
		nameMsg := fields["name"]
		if name, _ := nameMsg.ToString(); name != claim.Group {
			continue
		}
		st := groupState{lag: -1}
		if v, ok := fields["pending"]; ok {
			st.pending, _ = v.AsInt64()
		}
		if v, ok := fields["lag"]; ok && !v.IsNil() {
			if n, err := v.AsInt64(); err == nil {
				st.lag = n
			}
		}
		return st, nil
	}
	return groupState{}, fmt.Errorf("group state of %s: no %s group", id, claim.Group)
}

// groupWork reads the issuers group's backlog of promotion id; a stream or
// group that does not exist has none.
func (ps *streamPools) groupWork(ctx context.Context, id string) (groupState, error) {
	res := ps.client.Do(ctx, ps.client.B().XinfoGroups().Key(ps.gate.Keys(id).Stream()).Build())
	if err := res.Error(); err != nil && strings.Contains(err.Error(), "no such key") {
		return groupState{}, nil
	}
	work, err := parseGroupWork(id, res)
	if err != nil && res.Error() == nil {
		return groupState{}, nil // no issuers group
	}
	return work, err
}
