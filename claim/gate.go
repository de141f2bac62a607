package claim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dibsio/dibs/keyspace"
	"github.com/redis/rueidis"
)

// Sentinel outcomes of a claim. Callers switch on them with errors.Is.
var (
	// ErrNotFound means Redis holds no such promotion.
	ErrNotFound = errors.New("claim: promotion not found")
	// ErrWrongMode means the call does not fit the promotion's mode
	// (a claim on a grant promotion, or a grant on a first-come one).
	ErrWrongMode = errors.New("claim: wrong promotion mode")
	// ErrNotStarted means the promotion's window has not opened yet.
	ErrNotStarted = errors.New("claim: promotion not started")
	// ErrEnded means the promotion's window closed or it was closed.
	ErrEnded = errors.New("claim: promotion ended")
	// ErrAlreadyClaimed means the user reached the per-user limit.
	ErrAlreadyClaimed = errors.New("claim: already claimed")
	// ErrSoldOut means the stock is exhausted.
	ErrSoldOut = errors.New("claim: sold out")
	// ErrNotAdmitted means the promotion has a waiting room and the claim
	// carried no live pass of the user: none, or one unknown, spent,
	// expired or another user's. Nothing was written; the error's text
	// names the reason.
	ErrNotAdmitted = errors.New("claim: not admitted by the waiting room")
	// ErrVoided means an Idempotency-Key matched an accepted claim that an
	// admin voided since: it holds no unit any more.
	ErrVoided = errors.New("claim: claim voided")
	// ErrPaused means an admin paused the promotion (see Gate.BeginPatch):
	// nothing was taken; claims are answered again once it is resumed.
	ErrPaused = errors.New("claim: promotion paused by an admin")
	// ErrHeld is ErrPaused under its first name.
	//
	// Deprecated: use ErrPaused.
	ErrHeld = ErrPaused
	// ErrLost means the promotion's rank counter in Redis is below a rank
	// the caller knows to be taken: Redis lost writes. The script marked the
	// promotion rebuilding, nothing was taken, and it wraps ErrRebuilding, so callers
	// answer it as they answer a rebuild (retry shortly).
	ErrLost = fmt.Errorf("claim: Redis lost writes below a rank known to be taken: %w", ErrRebuilding)
)

var outcomes = map[string]error{
	"not_found":       ErrNotFound,
	"wrong_mode":      ErrWrongMode,
	"not_started":     ErrNotStarted,
	"ended":           ErrEnded,
	"already_claimed": ErrAlreadyClaimed,
	"sold_out":        ErrSoldOut,
	"rebuilding":      ErrRebuilding,
	"held":            ErrPaused, // the scripts' name of the admin's pause
	"voided":          ErrVoided,
	"lost":            ErrLost,
}

// Config configures a Gate.
type Config struct {
	// Prefix is prepended to every key, before the {promotion} hash tag.
	// It must not contain '{' or '}', which would change the hash tag.
	// Defaults to DefaultPrefix.
	Prefix string
	// Layout is the layout of the promotions whose Redis state this gate
	// creates (see Layout); a promotion keeps the layout it was created
	// with. Defaults to LayoutCompact; LayoutClassic while instances of an
	// earlier release, which cannot serve compact promotions, still run.
	Layout Layout
}

// withDefaults fills in the zero values.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Layout == LayoutDefault {
		c.Layout = LayoutCompact
	}
	return c
}

// validate names the first field that cannot work.
func (c Config) validate() error {
	if strings.ContainsAny(c.Prefix, "{}") {
		return fmt.Errorf("claim: Config.Prefix must not contain '{' or '}' (they would change the promotion's hash tag), got %q", c.Prefix)
	}
	if c.Layout != LayoutClassic && c.Layout != LayoutCompact {
		return fmt.Errorf("claim: Config.Layout must be LayoutClassic or LayoutCompact, got %d", c.Layout)
	}
	return nil
}

// Gate admits claims for promotions held in Redis.
type Gate struct {
	client rueidis.Client
	prefix string
	layout Layout
}

// New returns a Gate on client; an error names the Config field that
// cannot work.
func New(client rueidis.Client, cfg Config) (*Gate, error) {
	if client == nil {
		return nil, errors.New("claim: client is required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Gate{client: client, prefix: cfg.Prefix, layout: cfg.Layout}, nil
}

// Keys returns the keys of promotion id.
func (g *Gate) Keys(id string) Keys { return KeysFor(g.prefix, id) }

// Promotion is what the gate needs to know of a promotion.
type Promotion struct {
	ID           string
	Grant        bool // grant mode: targets are uploaded, not raced for
	Stock        int64
	PerUserLimit int
	StartsAt     time.Time
	EndsAt       time.Time
	Closed       bool
	// Paused is whether an admin paused the promotion's claims (see
	// Gate.BeginPatch); it is written only when the meta hash is created.
	Paused bool
	// SeqFloor is the lowest value the rank counter may have: the highest
	// rank the database knows. Used when rebuilding after Redis lost writes.
	SeqFloor int64
}

// Open makes the promotion's Redis state exist: its meta hash (if absent),
// its stream and its consumer group at id 0. It is idempotent and never
// resets a live promotion's counters. It reports whether the meta was created.
func (g *Gate) Open(ctx context.Context, p Promotion) (bool, error) {
	return g.open(ctx, p, false)
}

// open runs openScript for p; rebuilding creates an absent meta hash
// rebuilding (see OpenRebuilding).
func (g *Gate) open(ctx context.Context, p Promotion, rebuilding bool) (bool, error) {
	mode := "first_come"
	if p.Grant {
		mode = "grant"
	}
	return g.openOn(ctx, g.Keys(p.ID), p, mode, g.layout, rebuilding)
}

// openOn runs openScript on the keys k with p's definition, mode and
// layout (a segment's keys, share of the stock and classic layout, see
// OpenSegments).
func (g *Gate) openOn(ctx context.Context, k Keys, p Promotion, mode string, layout Layout, rebuilding bool) (bool, error) {
	closed := "0"
	if p.Closed {
		closed = "1"
	}
	args := []string{
		strconv.FormatInt(p.Stock, 10),
		strconv.Itoa(p.PerUserLimit),
		strconv.FormatInt(p.StartsAt.UnixMilli(), 10),
		strconv.FormatInt(p.EndsAt.UnixMilli(), 10),
		closed, mode,
		strconv.FormatInt(p.SeqFloor, 10),
		Group,
	}
	op := "open promotion " + p.ID
	args = append(args, flag(rebuilding), flag(p.Paused), layout.suffix())
	if rebuilding {
		op += " for a rebuild"
	}
	n, err := openScript.Exec(ctx, g.client, []string{k.Meta(), k.Seq(), k.Stream(), k.Status(), k.StatusBytes()}, args).AsInt64()
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return n == 1, nil
}

// Close marks the promotion closed: every later claim gets ErrEnded.
func (g *Gate) Close(ctx context.Context, id string) error {
	n, err := closeScript.Exec(ctx, g.client, []string{g.Keys(id).Meta()}, nil).AsInt64()
	if err != nil {
		return fmt.Errorf("close promotion %s: %w", id, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// Result is an accepted claim: the answer to a claim the gate took (or, when
// Replayed, took before). The promotion package gives it as
// promotion.Claimed.
type Result struct {
	// ClaimID names the claim in the work stream, the database and the
	// API (see ClaimID).
	ClaimID string
	// Rank is the claim's place in the promotion's order of acceptance,
	// from 1, unique in the promotion (a segmented promotion's ranks are
	// not dense: see Segments).
	Rank int64
	// Slot is which of the user's claims this is, from 1 up to the
	// promotion's per-user limit.
	Slot int
	// Replayed is true when an Idempotency-Key matched an earlier accepted
	// claim: this is that claim's original answer, no new unit was taken.
	Replayed bool
	// Remaining is the stock left after this claim; -1 when Replayed.
	Remaining int64
	// AcceptedAt is when Redis accepted the claim (Redis TIME, millisecond
	// precision), as its work-stream entry's at field holds it; zero when
	// Replayed.
	AcceptedAt time.Time
}

// Claim runs the claim script for userID in promotion id. idemKey is the
// client's Idempotency-Key or "". It returns the accepted claim or one of the
// sentinel errors; any other error is Redis's (the outcome is then unknown if
// it was a timeout: retry with the same idemKey).
func (g *Gate) Claim(ctx context.Context, id, userID, idemKey string) (Result, error) {
	return g.ClaimFenced(ctx, id, userID, idemKey, 0)
}

// ClaimFenced is Claim with a fence: the highest rank the caller knows to be
// taken in the promotion (see Fence). If Redis's rank counter is below it,
// Redis lost writes: nothing is taken, the promotion is marked rebuilding
// and ErrLost is returned, so no rank the caller knows of is
// handed out a second time.
func (g *Gate) ClaimFenced(ctx context.Context, id, userID, idemKey string, fence int64) (Result, error) {
	return claimReply(id, userID, claimScript.Exec(ctx, g.client, g.Keys(id).all(),
		[]string{userID, idemKey, id, strconv.FormatInt(fence, 10)}))
}

// ClaimRoomed is ClaimFenced for a promotion that may have a waiting room:
// roomKeys are the room's passes, live and meta keys (waitroom
// Keys.SpendKeys, under the promotion's hash tag) and passID the pass of
// the user's entry token, verified by the caller (0 for none). If the room
// exists, the claim needs a live pass of the user, which it spends in the
// step that takes the unit; otherwise it returns ErrNotAdmitted (wrapped,
// with the reason) having written nothing. A retry whose Idempotency-Key
// matched gets its original answer before the pass is looked at. Without
// the room the pass is ignored.
func (g *Gate) ClaimRoomed(ctx context.Context, id, userID, idemKey string, fence int64, roomKeys []string, passID int64) (Result, error) {
	if len(roomKeys) != 3 {
		return Result{}, fmt.Errorf("claim %s for %s: want 3 room keys, got %d", id, userID, len(roomKeys))
	}
	pass := ""
	if passID > 0 {
		pass = strconv.FormatInt(passID, 10)
	}
	return claimReply(id, userID, claimRoomScript.Exec(ctx, g.client, append(g.Keys(id).all(), roomKeys...),
		[]string{userID, idemKey, id, strconv.FormatInt(fence, 10), pass}))
}

// claimReply decodes the reply of a claim script. The claim methods run
// their script themselves, so a claim reaches Redis in as few frames as
// the reader follows (see promotion's claimer).
func claimReply(id, userID string, r rueidis.RedisResult) (Result, error) {
	msg, err := r.ToMessage()
	if err != nil {
		return Result{}, fmt.Errorf("claim %s for %s: %w", id, userID, err)
	}
	return decodeClaim(id, userID, &msg)
}

// GrantResult counts what Grant did.
type GrantResult struct {
	Enqueued   int
	Duplicates int
}

// Grant enqueues one grant per user in a grant promotion; users already
// granted are counted as duplicates and get nothing new. The batch is applied
// atomically.
func (g *Gate) Grant(ctx context.Context, id string, userIDs []string) (GrantResult, error) {
	return g.GrantFenced(ctx, id, userIDs, 0)
}

// GrantFenced is Grant with a fence, as ClaimFenced has.
func (g *Gate) GrantFenced(ctx context.Context, id string, userIDs []string, fence int64) (GrantResult, error) {
	k := g.Keys(id)
	args := make([]string, 0, len(userIDs)+2)
	args = append(args, id, strconv.FormatInt(fence, 10))
	args = append(args, userIDs...)
	vals, err := grantScript.Exec(ctx, g.client,
		[]string{k.Meta(), k.Seq(), k.Users(), k.Status(), k.ByUser(), k.Stream(), k.StatusBytes()}, args).ToArray()
	if err != nil {
		return GrantResult{}, fmt.Errorf("grant %s: %w", id, err)
	}
	status, err := vals[0].ToString()
	if err != nil {
		return GrantResult{}, fmt.Errorf("grant %s: %w", id, err)
	}
	if status != "ok" {
		if e, ok := outcomes[status]; ok {
			return GrantResult{}, e
		}
		return GrantResult{}, fmt.Errorf("grant %s: unexpected outcome %q", id, status)
	}
	enq, err1 := vals[1].ToInt64()
	dup, err2 := vals[2].ToInt64()
	if err := errors.Join(err1, err2); err != nil {
		return GrantResult{}, fmt.Errorf("grant %s: %w", id, err)
	}
	return GrantResult{Enqueued: int(enq), Duplicates: int(dup)}, nil
}

// State is a promotion's live Redis-side state.
type State struct {
	Stock  int64
	Seq    int64 // ranks handed out
	Voided int64 // units returned to stock
	Closed bool
}

// Accepted is the number of claims that hold a unit.
func (s State) Accepted() int64 { return s.Seq - s.Voided }

// Remaining is the stock not yet taken.
func (s State) Remaining() int64 { return max(s.Stock-s.Accepted(), 0) }

// State reads the promotion's counters; ErrNotFound if Redis has no meta.
func (g *Gate) State(ctx context.Context, id string) (State, error) {
	k := g.Keys(id)
	res := g.client.DoMulti(ctx,
		g.client.B().Hmget().Key(k.Meta()).Field(keyspace.FieldStock, keyspace.FieldVoided, keyspace.FieldClosed).Build(),
		g.client.B().Get().Key(k.Seq()).Build(),
	)
	return parseState(id, res[0], res[1])
}

// parseState reads a State from the replies of HMGET meta stock voided
// closed and GET seq.
func parseState(id string, metaRes, seqRes rueidis.RedisResult) (State, error) {
	meta, err := metaRes.ToArray()
	if err != nil {
		return State{}, fmt.Errorf("state of %s: %w", id, err)
	}
	if len(meta) < 3 || meta[0].IsNil() {
		return State{}, ErrNotFound
	}
	var s State
	s.Stock, _ = meta[0].AsInt64()
	if !meta[1].IsNil() {
		s.Voided, _ = meta[1].AsInt64()
	}
	if c, _ := meta[2].ToString(); c == "1" {
		s.Closed = true
	}
	seq, err := seqRes.AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return State{}, fmt.Errorf("state of %s: %w", id, err)
	}
	s.Seq = seq
	return s, nil
}

// Claim statuses as reported by UserClaims.
const (
	StatusPending = "pending"
	StatusIssued  = "issued"
	StatusFailed  = "failed"
	StatusVoided  = "voided"
	// StatusRevoked is an issued claim an admin revoked (see Gate.Revoke).
	StatusRevoked = "revoked"
)

// UserClaim is one of a user's claims as Redis knows it.
type UserClaim struct {
	Rank   int64
	Status string
	// IssuedAt is when the claim was issued, as a promotion of the classic
	// layout records it; zero unless issued, and zero for a compact
	// promotion, which leaves it to the database (see Layout).
	IssuedAt time.Time
}

// UserClaims returns the user's claims in the promotion, oldest first.
func (g *Gate) UserClaims(ctx context.Context, id, userID string) ([]UserClaim, error) {
	k := g.Keys(id)
	vals, err := userScript.Exec(ctx, g.client, []string{k.ByUser(), k.Status(), k.Meta(), k.StatusBytes()},
		[]string{userID}).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("claims of %s in %s: %w", userID, id, err)
	}
	out := make([]UserClaim, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		rank, err := strconv.ParseInt(vals[i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("claims of %s in %s: bad rank %q", userID, id, vals[i])
		}
		out = append(out, parseStatus(rank, vals[i+1]))
	}
	return out, nil
}

func parseStatus(rank int64, s string) UserClaim {
	c := UserClaim{Rank: rank, Status: StatusPending}
	switch {
	case s == "i":
		c.Status = StatusIssued
	case strings.HasPrefix(s, "i:"):
		c.Status = StatusIssued
		if ms, err := strconv.ParseInt(s[2:], 10, 64); err == nil {
			c.IssuedAt = time.UnixMilli(ms).UTC()
		}
	case s == "f":
		c.Status = StatusFailed
	case s == "v":
		c.Status = StatusVoided
	case s == "r":
		c.Status = StatusRevoked
	}
	return c
}

// ackChunk bounds the entries of one ack script call: 100 entries keep one
// call to about a tenth of a millisecond of Redis's time.
const ackChunk = 100

// Entry is a work-stream entry to acknowledge: its stream id and the rank it
// carries ("" if the entry was undecodable).
type Entry struct {
	ID   string
	Rank string
}

// Ack acknowledges entries of the promotion's stream and marks their claims
// issued, in one script call per ackChunk entries, all sent in one round
// trip. It returns the number of entries acknowledged; if a call failed, it
// returns the first error and the count of the calls that succeeded (the
// entries of a failed call stay pending).
func (g *Gate) Ack(ctx context.Context, id string, entries []Entry) (int64, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	k := g.Keys(id)
	keys := []string{k.Status(), k.Stream(), k.Meta(), k.StatusBytes()}
	execs := make([]rueidis.LuaExec, 0, (len(entries)+ackChunk-1)/ackChunk)
	for start := 0; start < len(entries); start += ackChunk {
		chunk := entries[start:min(start+ackChunk, len(entries))]
		args := make([]string, 0, 1+2*len(chunk))
		args = append(args, Group)
		for _, e := range chunk {
			args = append(args, e.ID, e.Rank)
		}
		execs = append(execs, rueidis.LuaExec{Keys: keys, Args: args})
	}
	var total int64
	var first error
	for i, r := range execPipelined(ctx, g.client, ackScript, execs) {
		n, err := r.AsInt64()
		if err != nil {
			if first == nil {
				first = fmt.Errorf("ack %d entries of %s: %w", (len(execs[i].Args)-1)/2, id, err)
			}
			continue
		}
		total += n
	}
	return total, first
}

// MarkFailed marks pending claims of the promotion failed (dead-lettered).
func (g *Gate) MarkFailed(ctx context.Context, id string, ranks ...int64) error {
	if len(ranks) == 0 {
		return nil
	}
	k := g.Keys(id)
	err := failScript.Exec(ctx, g.client, []string{k.Status(), k.Meta(), k.StatusBytes()}, formatInts(ranks)).Error()
	if err != nil {
		return fmt.Errorf("mark failed in %s: %w", id, err)
	}
	return nil
}

// ErrUnknownRank means Redis holds no status for a claim's rank: it lost
// the claim and no rebuild has restored it yet. Nothing was changed.
var ErrUnknownRank = errors.New("claim: Redis holds no status for the rank")

// Replay puts a dead-lettered claim back into the promotion's stream with
// its original fields (so under its original claim id). Only a claim whose
// status is failed is re-enqueued; it reports false for any other (already
// replayed, issued or voided), so applying a replay twice is harmless. It
// returns ErrUnknownRank, having done nothing, if Redis holds no status for
// the rank.
func (g *Gate) Replay(ctx context.Context, id string, rank int64, fields map[string]string) (bool, error) {
	k := g.Keys(id)
	args := make([]string, 0, 1+2*len(fields))
	args = append(args, strconv.FormatInt(rank, 10))
	for _, f := range []string{"claim_id", "user", "rank", "slot", "at"} {
		if v, ok := fields[f]; ok {
			args = append(args, f, v)
		}
	}
	if len(args) == 1 {
		return false, fmt.Errorf("replay %s rank %d: no fields", id, rank)
	}
	n, err := replayScript.Exec(ctx, g.client, []string{k.Status(), k.Stream(), k.Meta(), k.StatusBytes()}, args).AsInt64()
	if err != nil {
		return false, fmt.Errorf("replay %s rank %d: %w", id, rank, err)
	}
	if n < 0 {
		return false, fmt.Errorf("replay %s rank %d: %w", id, rank, ErrUnknownRank)
	}
	return n == 1, nil
}

// Void gives up on dead-lettered claims and returns their units to stock.
// It returns how many were voided, and the ranks Redis holds no status for
// (it lost those claims and no rebuild has restored them yet): nothing was
// done for those, and the void must be applied again later.
func (g *Gate) Void(ctx context.Context, id string, ranks ...int64) (voided int64, unknown []int64, err error) {
	if len(ranks) == 0 {
		return 0, nil, nil
	}
	k := g.Keys(id)
	vals, err := voidScript.Exec(ctx, g.client, []string{k.Meta(), k.Status(), k.StatusBytes()}, formatInts(ranks)).ToArray()
	if err == nil && len(vals) == 0 {
		err = errors.New("empty script reply")
	}
	if err != nil {
		return 0, nil, fmt.Errorf("void in %s: %w", id, err)
	}
	voided, err = vals[0].AsInt64()
	for _, v := range vals[1:] {
		if err != nil {
			break
		}
		var r int64
		r, err = v.AsInt64()
		unknown = append(unknown, r)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("void in %s: %w", id, err)
	}
	return voided, unknown, nil
}

// Ended decides, against Redis TIME, whether the promotion has ended
// (closed, or past its end), and returns its rank counter read in the same
// step. An ended promotion is marked closed in Redis, so no claim is
// accepted after this answer: a promotion found ended with the database
// accounting for every rank up to seq is drained for good. ErrNotFound if
// Redis has no meta hash for it.
func (g *Gate) Ended(ctx context.Context, id string) (ended bool, seq int64, err error) {
	k := g.Keys(id)
	vals, err := endScript.Exec(ctx, g.client, []string{k.Meta(), k.Seq()}, nil).AsIntSlice()
	if err != nil {
		return false, 0, fmt.Errorf("end check of %s: %w", id, err)
	}
	if len(vals) == 0 || vals[0] < 0 {
		return false, 0, ErrNotFound
	}
	if len(vals) < 2 {
		return false, 0, fmt.Errorf("end check of %s: short reply", id)
	}
	return vals[0] == 1, vals[1], nil
}

func formatInts(v []int64) []string {
	out := make([]string, len(v))
	for i, n := range v {
		out[i] = strconv.FormatInt(n, 10)
	}
	return out
}
