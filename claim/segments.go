package claim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/dibsio/dibs/keyspace"
	"github.com/redis/rueidis"
)

// Segments: one promotion past one Redis core.
//
// A promotion lives under one hash tag, so in one Cluster slot on one
// master, and one Redis core caps its claims. A promotion with n > 1
// segments splits its stock into n parts, each under a hash tag of its own:
// segment 0 under the promotion's own tag {id}, segment k under a tag
// {id#k} or {id#k.j} chosen so that the segments' slots fall in n different
// n-ths of the slot space (so on different masters of an evenly split
// Cluster; see SegmentsOf). Each segment has its own meta hash with its
// share of the stock, its own rank counter, per-user counts, statuses,
// idempotency records and work stream: a claim touches exactly one segment.
//
// A user always claims from the same segment, hash(user) mod n (see
// Segments.Of), so the segment's per-user count enforces the per-user limit
// and an Idempotency-Key retry finds its original answer.
//
// Ranks. Segment k hands out local ranks 1, 2, 3… in its own arrival order;
// the claim's rank — in its claim id <promotion>#<rank>, its work-stream
// entry and the database — is (local − 1) × n + k + 1 (Segments.Rank). So
// ranks are unique in the promotion, ordered by arrival within a segment,
// and interleaved across segments (rank r is segment (r − 1) mod n's local
// rank (r − 1) / n + 1); they are not dense 1..stock. With one segment the
// rank is the local rank and nothing changes.
//
// Stock moves. A claim whose segment has no unit left borrows before it
// answers sold out (see ClaimSegmented): it reads every segment's remaining
// stock in one pipelined round trip and moves half (rounded up) of the
// richest segment's remaining units to its own, in two scripts — take from
// the source, recording the transfer under a random id in the source's
// transfers hash in the same step; give to the destination, recording the
// id in its received hash so a give runs once — and then deletes the
// record. A crash between take and give leaves the record, which
// SettleTransfers (run by every re-check) gives again: units are never
// created, and only in flight for a moment. The promotion is sold out when
// every segment is empty and no transfer is in flight.

// MaxSegments bounds the segments of one promotion.
const MaxSegments = 64

// maxBorrows bounds the borrows one claim tries before it answers sold out.
const maxBorrows = 3

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// maxTagProbes bounds the candidate tags tried per segment.
const maxTagProbes = 1 << 16

// modeSegment is the meta hash's mode of every segment of a promotion with
// more than one: the plain claim and grant scripts answer wrong_mode to
// it, so no claim is ever taken with a rank outside the segment's own.
const modeSegment = "segment"

// Segments is the layout of a promotion's segments. Its zero value is not
// usable; make it with SegmentsOf.
type Segments struct {
	id   string
	tags []string // tags[0] == id
}

// SegmentsOf returns the segments of promotion id split into n parts (1 for
// none). Segment 0's tag is id; segment k's is the first of id#k, id#k.1,
// id#k.2… whose Cluster slot lies in the n-th of the slot space k places
// after segment 0's, so the n segments fall in n different n-ths (on n
// different masters of a Cluster whose masters hold equal slot ranges, as
// redis-cli makes them). The layout depends on id and n alone: every
// instance computes the same. n outside 1..MaxSegments is taken as 1.
func SegmentsOf(id string, n int) Segments {
	if n < 1 || n > MaxSegments {
		n = 1
	}
	s := Segments{id: id, tags: make([]string, n)}
	s.tags[0] = id
	if n == 1 {
		return s
	}
	first := int(KeySlot(id)) * n / clusterSlots
	for k := 1; k < n; k++ {
		want := (first + k) % n
		base := id + "#" + strconv.Itoa(k)
		s.tags[k] = base
		for j := 1; j < maxTagProbes; j++ {
			cand := base
			if j > 1 {
				cand = base + "." + strconv.Itoa(j-1)
			}
			if int(KeySlot(cand))*n/clusterSlots == want {
				s.tags[k] = cand
				break
			}
		}
	}
	return s
}

// ID is the promotion's id.
func (s Segments) ID() string { return s.id }

// N is the number of segments.
func (s Segments) N() int { return len(s.tags) }

// Tag is segment k's hash tag (the id its keys are made from: Gate.Keys of
// it are the segment's keys).
func (s Segments) Tag(k int) string { return s.tags[k] }

// Tags lists the segments' tags, segment 0 (the promotion's id) first.
func (s Segments) Tags() []string { return s.tags }

// Of returns the segment of userID: FNV-1a of the id, mod N. It never
// changes for a user, so one user always claims from one segment.
func (s Segments) Of(userID string) int {
	if len(s.tags) == 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(userID))
	return int(h.Sum32() % uint32(len(s.tags)))
}

// Rank returns the promotion-wide rank of segment k's local rank.
func (s Segments) Rank(k int, local int64) int64 {
	return (local-1)*int64(len(s.tags)) + int64(k) + 1
}

// Segment returns the segment that handed out the promotion-wide rank
// (rank ≥ 1), and its local rank there.
func (s Segments) Segment(rank int64) (k int, local int64) {
	n := int64(len(s.tags))
	return int((rank - 1) % n), (rank-1)/n + 1
}

// Share returns segment k's share of stock when the promotion is opened:
// stock / N, the first stock mod N segments one more.
func (s Segments) Share(k int, stock int64) int64 {
	n := int64(len(s.tags))
	share := stock / n
	if int64(k) < stock%n {
		share++
	}
	return share
}

// KeySlot returns the Redis Cluster slot of a key or hash tag: CRC16
// (XMODEM) of the part between the first '{' and the next '}' if that part
// is not empty, else of the whole key, mod 16384.
func KeySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % clusterSlots
}

// Transfers maps the id of a transfer taken from this segment and not yet
// known to be given to "<destination segment>:<units>" (see Segments).
func (k Keys) Transfers() string { return k.space.Key(keyspace.Transfers) }

// Received records the ids of the transfers this segment was given, so
// each is given once.
func (k Keys) Received() string { return k.space.Key(keyspace.Received) }

// claimSegScriptSource is the claim script of one segment: claimScript's
// steps with the segment's mode and its rank made promotion-wide. ARGV[5]
// is the number of segments, ARGV[6] the segment's index.
const claimSegScriptSource = "-- dibs:claim_seg v2" + layoutLua + claimHeadMeta +
	`if mode ~= 'segment' then return {'wrong_mode'} end
` + claimHeadRest + claimTakeCheck +
	`local lrank = redis.call('INCR', KEYS[2])
local rank = (lrank - 1) * tonumber(ARGV[5]) + tonumber(ARGV[6]) + 1
` + claimTakeWrite + `return {'ok', rank, 0, slot, stock - (lrank - voided), now}
`

// claimSegScript admits one claim in one segment of a promotion with more
// than one.
//
// KEYS: the segment's meta, seq, users, status, byuser, idem, stream,
// status bytes (as claimScript; a segment is of the classic layout). ARGV: user id, Idempotency-Key ("" for none), promotion id
// (the claim id's prefix), fence ("0": segments have none), number of
// segments, the segment's index.
//
// Replies as claimScript, with the promotion-wide rank (Segments.Rank of
// the segment's new local rank) in the reply, the status, byuser and idem
// records and the entry (rank and claim_id <promotion>#<rank>), and the
// segment's remaining stock as remaining. sold_out means this segment has
// no unit left. A meta hash whose mode is not segment answers wrong_mode.
var claimSegScript = newScript(claimSegScriptSource)

// segTakeScript takes units from a segment for another one.
//
// KEYS: the source segment's meta, seq, transfers.
// ARGV: transfer id, destination segment index.
//
// It takes half (rounded up) of the source's remaining units, lowering its
// stock and recording "<destination>:<units>" under the transfer id in the
// same step. Returns the units taken (0 if the source has none left, or
// no meta hash).
var segTakeScript = newScript(`-- dibs:seg_take v1
local m = redis.call('HMGET', KEYS[1], 'stock', 'voided')
if not m[1] then return 0 end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local left = tonumber(m[1]) - (seq - tonumber(m[2] or '0'))
if left <= 0 then return 0 end
local n = math.ceil(left / 2)
redis.call('HINCRBY', KEYS[1], 'stock', -n)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ':' .. n)
return n
`)

// segGiveScript gives a transfer's units to its destination segment, once.
//
// KEYS: the destination's meta, received.
// ARGV: transfer id, units.
//
// Returns 1 if it gave them now, 0 if the transfer was given before, -1
// if the destination has no meta hash (Redis lost it; the transfer stays
// in flight until it is open again).
var segGiveScript = newScript(`-- dibs:seg_give v1
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'stock', ARGV[2])
return 1
`)

// OpenSegments makes the Redis state of every segment of p exist (see
// Open): segment k's meta hash with its Share of p.Stock, mode segment, its
// stream and consumer group. A promotion with one segment is opened as
// Open does. A segment whose meta hash is created while floor > 0 (the
// database holds ranks up to floor: Redis lost this segment) gets no units
// and its rank counter raised above every local rank floor can hold, so
// it never hands out a rank or a unit the database may hold; the units it
// had are not sold (see docs/durability.md). It reports the segments
// created.
func (g *Gate) OpenSegments(ctx context.Context, p Promotion, s Segments, floor int64) ([]int, error) {
	if s.N() == 1 {
		created, err := g.Open(ctx, p)
		if created {
			return []int{0}, err
		}
		return nil, err
	}
	var made []int
	for k := range s.N() {
		q := p
		q.Stock = s.Share(k, p.Stock)
		q.SeqFloor = 0
		if floor > 0 {
			local := (floor + int64(s.N()) - 1) / int64(s.N())
			q.Stock, q.SeqFloor = local, local
			if exists, err := g.client.Do(ctx, g.client.B().Exists().Key(g.Keys(s.Tag(k)).Meta()).Build()).AsInt64(); err != nil {
				return made, fmt.Errorf("open segment %d of %s: %w", k, p.ID, err)
			} else if exists == 1 {
				continue
			}
		}
		created, err := g.openOn(ctx, g.Keys(s.Tag(k)), q, modeSegment, LayoutClassic, false)
		if err != nil {
			return made, fmt.Errorf("segment %d: %w", k, err)
		}
		if created {
			made = append(made, k)
		}
	}
	// Segment 0's meta hash tells the segment count to an instance that has
	// not read the promotion's definition yet (SegmentCount).
	meta := g.Keys(s.Tag(0)).Meta()
	if err := g.client.Do(ctx, g.client.B().Hset().Key(meta).FieldValue().
		FieldValue("segments", strconv.Itoa(s.N())).Build()).Error(); err != nil {
		return made, fmt.Errorf("open segments of %s: %w", p.ID, err)
	}
	return made, nil
}

// SegmentCount returns the segment count that OpenSegments wrote in the
// meta hash of promotion id (its segment 0): 0 if it holds none (a
// promotion of one segment, or none at all).
func (g *Gate) SegmentCount(ctx context.Context, id string) (int, error) {
	n, err := g.client.Do(ctx, g.client.B().Hget().Key(g.Keys(id).Meta()).Field("segments").Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("segments of %s: %w", id, err)
	}
	return int(n), nil
}

// ClaimSegmented admits one claim of userID in the promotion of s, from
// the user's segment (s.Of). If that segment has no unit left it borrows
// from the richest one (see Segments) and tries again, at most maxBorrows
// times, and answers ErrSoldOut once no segment has a unit left and no
// transfer is in flight — or, under a burst of borrowing segments, after
// its last borrow (docs/benchmarks.md measures how often). Other outcomes
// are Claim's. Result.Remaining is the user's segment's remaining stock.
// With one segment it is Claim.
func (g *Gate) ClaimSegmented(ctx context.Context, s Segments, userID, idemKey string) (Result, error) {
	if s.N() == 1 {
		return g.Claim(ctx, s.ID(), userID, idemKey)
	}
	k := s.Of(userID)
	keys := g.Keys(s.Tag(k)).all()
	args := []string{userID, idemKey, s.ID(), "0", strconv.Itoa(s.N()), strconv.Itoa(k)}
	for attempt := 0; ; attempt++ {
		res, err := claimReply(s.ID(), userID, claimSegScript.Exec(ctx, g.client, keys, args))
		if !errors.Is(err, ErrSoldOut) || attempt == maxBorrows {
			return res, err
		}
		moved, err := g.borrow(ctx, s, k)
		if err != nil {
			return Result{}, fmt.Errorf("claim %s for %s: %w", s.ID(), userID, err)
		}
		if !moved {
			return Result{}, ErrSoldOut
		}
	}
}

// borrow moves units from the richest other segment to segment to. With
// none left anywhere it gives the transfers in flight (they may be for
// segment to) and reports whether there were any.
func (g *Gate) borrow(ctx context.Context, s Segments, to int) (bool, error) {
	st, err := g.SegmentStates(ctx, s)
	if err != nil {
		return false, err
	}
	from, best := -1, int64(0)
	var inFlight int64
	for k, x := range st {
		inFlight += x.InFlight
		if k != to && x.Remaining() > best {
			from, best = k, x.Remaining()
		}
	}
	if from < 0 {
		if inFlight == 0 {
			return false, nil
		}
		return true, g.SettleTransfers(ctx, s)
	}
	_, err = g.Transfer(ctx, s, from, to)
	return true, err
}

// Transfer moves half (rounded up) of segment from's remaining units to
// segment to (see Segments) and returns how many it moved.
func (g *Gate) Transfer(ctx context.Context, s Segments, from, to int) (int64, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	src := g.Keys(s.Tag(from))
	n, err := segTakeScript.Exec(ctx, g.client, []string{src.Meta(), src.Seq(), src.Transfers()},
		[]string{id, strconv.Itoa(to)}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("take units of %s segment %d: %w", s.ID(), from, err)
	}
	if n == 0 {
		return 0, nil
	}
	return n, g.give(ctx, s, from, to, id, n)
}

// give gives transfer id of n units from segment from to segment to, then
// deletes its record from the source.
func (g *Gate) give(ctx context.Context, s Segments, from, to int, id string, n int64) error {
	dst := g.Keys(s.Tag(to))
	r, err := segGiveScript.Exec(ctx, g.client, []string{dst.Meta(), dst.Received()},
		[]string{id, strconv.FormatInt(n, 10)}).AsInt64()
	if err != nil {
		return fmt.Errorf("give %d units to %s segment %d: %w", n, s.ID(), to, err)
	}
	if r < 0 {
		return fmt.Errorf("give %d units to %s segment %d: %w", n, s.ID(), to, ErrNotFound)
	}
	src := g.Keys(s.Tag(from)).Transfers()
	if err := g.client.Do(ctx, g.client.B().Hdel().Key(src).Field(id).Build()).Error(); err != nil {
		return fmt.Errorf("settle transfer %s of %s: %w", id, s.ID(), err)
	}
	return nil
}

// SettleTransfers gives every transfer taken from a segment of s and not
// known to be given (a process died between the two steps, or a give
// failed), so units in flight reach their segment. Giving is idempotent:
// running it beside live transfers, or twice, moves each transfer once.
func (g *Gate) SettleTransfers(ctx context.Context, s Segments) error {
	if s.N() == 1 {
		return nil
	}
	cmds := make(rueidis.Commands, s.N())
	for k := range s.N() {
		cmds[k] = g.client.B().Hgetall().Key(g.Keys(s.Tag(k)).Transfers()).Build()
	}
	var errs []error
	for from, res := range g.client.DoMulti(ctx, cmds...) {
		recs, err := res.AsStrMap()
		if err != nil {
			errs = append(errs, fmt.Errorf("transfers of %s segment %d: %w", s.ID(), from, err))
			continue
		}
		for id, rec := range recs {
			to, n, ok := parseTransfer(rec, s.N())
			if !ok {
				errs = append(errs, fmt.Errorf("transfer %s of %s segment %d: bad record %q", id, s.ID(), from, rec))
				continue
			}
			errs = append(errs, g.give(ctx, s, from, to, id, n))
		}
	}
	return errors.Join(errs...)
}

// parseTransfer reads a transfer record "<destination>:<units>".
func parseTransfer(rec string, n int) (to int, units int64, ok bool) {
	a, b, found := strings.Cut(rec, ":")
	if !found {
		return 0, 0, false
	}
	to, err1 := strconv.Atoi(a)
	units, err2 := strconv.ParseInt(b, 10, 64)
	return to, units, err1 == nil && err2 == nil && to >= 0 && to < n && units > 0
}

// SegmentState is one segment's live state.
type SegmentState struct {
	State
	// InFlight counts the units taken from this segment by transfers not
	// known to be given yet.
	InFlight int64
}

// SegmentStates reads every segment's counters and transfers in flight, in
// one pipelined round trip; ErrNotFound if a segment has no meta hash.
func (g *Gate) SegmentStates(ctx context.Context, s Segments) ([]SegmentState, error) {
	b := g.client.B()
	cmds := make(rueidis.Commands, 0, 3*s.N())
	for k := range s.N() {
		sk := g.Keys(s.Tag(k))
		cmds = append(cmds,
			b.Hmget().Key(sk.Meta()).Field(keyspace.FieldStock, keyspace.FieldVoided, keyspace.FieldClosed).Build(),
			b.Get().Key(sk.Seq()).Build(),
			b.Hvals().Key(sk.Transfers()).Build())
	}
	res := g.client.DoMulti(ctx, cmds...)
	out := make([]SegmentState, s.N())
	for k := range out {
		st, err := parseState(s.ID(), res[3*k], res[3*k+1])
		if err != nil {
			return nil, err
		}
		recs, err := res[3*k+2].AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("transfers of %s segment %d: %w", s.ID(), k, err)
		}
		out[k] = SegmentState{State: st}
		for _, rec := range recs {
			if _, n, ok := parseTransfer(rec, s.N()); ok {
				out[k].InFlight += n
			}
		}
	}
	return out, nil
}

// SegmentsState sums the segments' states into the promotion's: its stock
// counts the units in flight, so Remaining is 0 only when every segment is
// empty and no transfer is in flight; Closed is whether every segment is.
func SegmentsState(st []SegmentState) State {
	var sum State
	sum.Closed = len(st) > 0
	for _, x := range st {
		sum.Stock += x.Stock + x.InFlight
		sum.Seq += x.Seq
		sum.Voided += x.Voided
		sum.Closed = sum.Closed && x.Closed
	}
	return sum
}

// CloseSegments closes every segment of s (see Close); ErrNotFound if a
// segment has no meta hash (the others are closed all the same).
func (g *Gate) CloseSegments(ctx context.Context, s Segments) error {
	var errs []error
	for _, tag := range s.Tags() {
		if err := g.Close(ctx, tag); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 && errors.Is(errs[0], ErrNotFound) {
		return ErrNotFound
	}
	return errors.Join(errs...)
}

// EndedSegments is Ended over every segment of s: ended only if every
// segment is (each one found ended is closed, so it accepts nothing
// after), with the sum of their rank counters — the number of ranks the
// promotion handed out.
func (g *Gate) EndedSegments(ctx context.Context, s Segments) (ended bool, seq int64, err error) {
	ended = true
	for _, tag := range s.Tags() {
		e, n, err := g.Ended(ctx, tag)
		if err != nil {
			return false, 0, err
		}
		ended = ended && e
		seq += n
	}
	return ended, seq, nil
}

// TagOfRank is the tag of the segment that handed out the promotion-wide
// rank (rank ≥ 1): where the claim's status and stream entry live.
func (s Segments) TagOfRank(rank int64) string {
	k, _ := s.Segment(rank)
	return s.tags[k]
}
