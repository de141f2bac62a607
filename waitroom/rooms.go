package waitroom

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Status is a user's standing in a room.
type Status string

// Statuses of a user.
const (
	// StatusWaiting: in line; Position says where.
	StatusWaiting Status = "waiting"
	// StatusAdmitted: let in; the pass lets the user claim once until it
	// expires.
	StatusAdmitted Status = "admitted"
	// StatusUsed: the user's pass was spent by a claim, and the user's
	// claims reach the promotion's per-user limit. A user below it (a
	// limit above 1) who joins again takes a new place at the back; until
	// then Status answers used too.
	StatusUsed Status = "used"
	// StatusExpired: the user's pass expired unspent; joining again takes a
	// place at the back.
	StatusExpired Status = "expired"
	// StatusAbandoned: the user stopped checking in and lost the place;
	// joining again takes a place at the back.
	StatusAbandoned Status = "abandoned"
	// StatusSoldOut: the stock is gone; nobody else is let in.
	StatusSoldOut Status = "sold_out"
	// StatusEnded: the promotion ended or was closed.
	StatusEnded Status = "ended"
)

// Standing is a user's standing in a room, as Join and Status answer it.
type Standing struct {
	// Status is the user's status.
	Status Status
	// Place is the user's place in order of joining (waiting users only).
	Place int64
	// Position is the live place in line, 1 = next to be let in: the
	// user's place minus the places admission has passed. Users ahead who
	// abandoned are counted until admission reaches and skips them, so it
	// is an upper bound that only falls. 0 unless waiting.
	Position int64
	// Wait estimates the time until the user is let in, from the admission
	// rate and the measured speed of the line (waiting users only).
	Wait Estimate
	// StockExpectedToLast tells whether the units neither taken nor
	// promised to a live pass cover everyone up to the user (waiting users
	// only).
	StockExpectedToLast bool
	// Pass is the user's latest pass (admitted, used, expired).
	Pass Pass
	// Token is the signed entry token of Pass (admitted users only).
	Token string
	// Now is Redis TIME when the answer was made.
	Now time.Time
	// ShuffleAt is when the prequeue's places are dealt: the room's
	// opening (StatusPrequeue only; the shuffle runs at the first tick at
	// or after it).
	ShuffleAt time.Time
	// Paused tells that the room is paused (an admin paused the
	// promotion's claims, or the promotion is rebuilding): nobody is let
	// in until it resumes, and Wait counts from the resume.
	Paused bool
	// Message is the room's message to everyone in line (Settings.Message),
	// "" for none.
	Message string
}

// Rooms holds the waiting rooms of promotions in Redis. It is safe for
// concurrent use.
type Rooms struct {
	client rueidis.Client
	cfg    Config
	signer *Signer
	opened opened // the rooms opened here (Opened)
	// pow counts the proof-of-work checks of joins by room (Collector).
	pow powCounts
}

// New returns Rooms on client.
func New(client rueidis.Client, cfg Config) (*Rooms, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	signer, err := NewSigner(cfg.Keys...)
	if err != nil {
		return nil, err
	}
	return &Rooms{client: client, cfg: cfg, signer: signer}, nil
}

// Keys returns the keys of promotion id's room.
func (r *Rooms) Keys(id string) Keys { return KeysFor(r.cfg.Prefix, id) }

// Signer returns the signer of entry tokens.
func (r *Rooms) Signer() *Signer { return r.signer }

// registry is the set of rooms the previous release's scheduler ticks.
func (r *Rooms) registry() string { return r.cfg.Prefix + registryName }

// Open creates promotion id's room with s, or updates the entry TTL and the
// abandonment time of the room that exists (its opening and prequeue stay
// as created; its rate, cap on live passes, message and difficulty change
// only by Apply), and adds it to Opened. It also adds the room to the
// registry set the previous release's scheduler reads (this release reads
// it nowhere). A room is created in Config.Layout. The promotion's claim state (claim.Gate.Open) should exist
// first; until it does, joins answer ErrNotFound. Open reports whether it
// created the room.
func (r *Rooms) Open(ctx context.Context, id string, s Settings) (bool, error) {
	s = s.withDefaults()
	if err := s.validate(); err != nil {
		return false, err
	}
	k := r.Keys(id)
	var opens, pqFrom int64
	if !s.OpensAt.IsZero() {
		opens = s.OpensAt.UnixMilli()
	}
	var seed string
	if !s.PrequeueFrom.IsZero() {
		pqFrom, seed = max(s.PrequeueFrom.UnixMilli(), 1), hex.EncodeToString(s.Seed)
	}
	n, err := openScript.Exec(ctx, r.client, []string{k.Meta(), k.ClaimMeta(), k.Place(), k.ByPlace(), k.Seen()}, []string{
		strconv.FormatInt(s.AdmitPerSecond, 10),
		strconv.FormatInt(s.EntryTTL.Milliseconds(), 10),
		strconv.FormatInt(s.AbandonAfter.Milliseconds(), 10),
		strconv.FormatInt(opens, 10),
		strconv.FormatInt(pqFrom, 10),
		seed,
		strconv.FormatInt(s.MaxActive, 10),
		s.Message,
		strconv.Itoa(s.PowDifficulty),
		strconv.Itoa(int(r.cfg.Layout)),
	}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("open waiting room %s: %w", id, err)
	}
	if err := r.client.Do(ctx, r.client.B().Sadd().Key(r.registry()).Member(id).Build()).Error(); err != nil {
		return false, fmt.Errorf("register waiting room %s: %w", id, err)
	}
	r.opened.add(id)
	return n == 1, nil
}

// Unregister removes promotion id's room from Opened and from the registry
// set of the previous release's scheduler; its state stays for status
// lookups. The promotion manager unregisters a room when it retires its
// promotion.
func (r *Rooms) Unregister(ctx context.Context, id string) error {
	r.opened.remove(id)
	r.pow.drop(id)
	if err := r.client.Do(ctx, r.client.B().Srem().Key(r.registry()).Member(id).Build()).Error(); err != nil {
		return fmt.Errorf("unregister waiting room %s: %w", id, err)
	}
	return nil
}

// Join puts userID in line in promotion id's room, or answers the standing
// of a user already there: joining again, from any number of tabs, keeps
// the place. A user whose pass was spent joins again at the back while the
// user's claims are below the promotion's per-user limit, and is answered
// StatusUsed at the limit. It returns ErrEnded, ErrSoldOut or ErrNotFound when the user
// cannot join, and ErrNotStarted before a prequeue's opening moment. During
// the opening moment the user is collected unordered (StatusPrequeue) and
// gets a place from the shuffle. A room that asks for a proof of work
// (Settings.PowDifficulty) refuses it with a *ChallengeError: see
// JoinWithProof.
func (r *Rooms) Join(ctx context.Context, id, userID string) (Standing, error) {
	return r.JoinWithProof(ctx, id, userID, Proof{}, 0)
}

// Status answers userID's standing in promotion id's room; checkIn records
// that the user is still there (a waiting user who does not check in for the
// room's AbandonAfter loses the place). Users who never joined get
// ErrNotJoined. Ended and sold-out promotions answer StatusEnded and
// StatusSoldOut to every user who has not spent a pass.
func (r *Rooms) Status(ctx context.Context, id, userID string, checkIn bool) (Standing, error) {
	ci := "0"
	if checkIn {
		ci = "1"
	}
	vals, err := statusScript.Exec(ctx, r.client, r.Keys(id).room(), []string{userID, ci}).ToArray()
	if err != nil {
		return Standing{}, fmt.Errorf("status in %s of %s: %w", id, userID, err)
	}
	st, err := r.standing(id, userID, vals)
	if err != nil {
		return Standing{}, fmt.Errorf("status in %s of %s: %w", id, userID, err)
	}
	return st, nil
}

// standing decodes the reply of the join and status scripts.
func (r *Rooms) standing(id, userID string, vals []rueidis.RedisMessage) (Standing, error) {
	if len(vals) == 0 {
		return Standing{}, errors.New("empty script reply")
	}
	status, err := vals[0].ToString()
	if err != nil {
		return Standing{}, err
	}
	if len(vals) == 1 {
		if e, ok := outcomes[status]; ok {
			return Standing{}, e
		}
		if status == "not_started" {
			return Standing{}, ErrNotStarted
		}
		return Standing{}, fmt.Errorf("unexpected outcome %q", status)
	}
	if len(vals) < 11 {
		return Standing{}, fmt.Errorf("short script reply (%d values)", len(vals))
	}
	var n [8]int64 // place, cursor, pass, exp, remaining, live, now, rate
	for i := range n {
		if n[i], err = vals[i+1].AsInt64(); err != nil {
			return Standing{}, err
		}
	}
	place, cursor, pass, exp, remaining, live, now, rate := n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]
	measured := 0.0
	if s, _ := vals[9].ToString(); s != "" {
		measured, _ = strconv.ParseFloat(s, 64)
	}
	st := Standing{Status: Status(status), Now: time.UnixMilli(now).UTC()}
	if len(vals) > 11 {
		p, err := vals[11].AsInt64()
		if err != nil {
			return Standing{}, err
		}
		st.Paused = p == 1
	}
	if len(vals) > 12 {
		st.Message, _ = vals[12].ToString()
	}
	if pass > 0 {
		st.Pass = Pass{Promotion: id, User: userID, ID: pass, ExpiresAt: time.UnixMilli(exp).UTC()}
	}
	switch st.Status {
	case StatusWaiting:
		st.Place = place
		st.Position = max(place-cursor, 1)
		st.Wait = EstimateWait(st.Position, rate, measured)
		st.StockExpectedToLast = StockExpectedToLast(st.Position, remaining-live)
	case StatusAdmitted:
		st.Token = r.signer.Sign(st.Pass)
	case StatusPrequeue:
		opens, err := vals[10].AsInt64()
		if err != nil {
			return Standing{}, err
		}
		st.ShuffleAt = time.UnixMilli(opens).UTC()
	}
	return st, nil
}

// TickResult is what one tick of a room did and saw.
type TickResult struct {
	// State is the promotion's state: "open", "paused" (an admin paused
	// its claims, or it is rebuilding: nobody is let in meanwhile),
	// "sold_out" or "ended".
	State string
	// Now is the Redis TIME the tick used, in ms since the epoch.
	Now int64
	// Allowed is the admissions the room's allowance allows in total at
	// Now: those before the tick plus the whole users of the allowance,
	// capped at two ticks' worth (see tickScript). While users wait and
	// ticks come in time it is ⌊rate × (Now − opening) / 1000⌋.
	Allowed int64
	// Admitted is the passes handed out in total after the tick.
	Admitted int64
	// Cursor is the last place admission has passed.
	Cursor int64
	// Skipped is the places passed without admission in total (abandoned
	// users, and places left by users who joined again).
	Skipped int64
	// Remaining is the stock not yet taken (stock + voided − seq).
	Remaining int64
	// Live is the passes unspent and unexpired after the tick.
	Live int64
	// Joined is the places handed out: the room's last place (Seq), as
	// Counts.Joined reads it.
	Joined int64
	// Waiting is the line's length as Counts.Waiting reads it: the places
	// not yet reached by admission (Joined − Cursor, users who abandoned
	// ahead of being reached included) and, until the shuffle seals it,
	// the users the prequeue collected.
	Waiting int64
	// New are the users let in by this tick, in order.
	New []Admission
}

// Tick advances admission in promotion id's room to what Redis TIME, the
// room's allowance and the stock allow (see tickScript): the allowance is
// capped at two of Config.TickInterval's worth, and not banked while
// nobody waits. Any number of callers may tick one room at once: each
// admission happens once, and together they admit no more than one caller
// would. ErrNotFound if the room is missing.
//
// The first tick at or after the opening of a room with a prequeue shuffles
// it (see PrequeueOrder) before it admits anyone; ticks at once shuffle
// once.
func (r *Rooms) Tick(ctx context.Context, id string) (TickResult, error) {
	batch := strconv.Itoa(r.cfg.TickBatch)
	tick := strconv.FormatInt(r.cfg.TickInterval.Milliseconds(), 10)
	var (
		vals  []rueidis.RedisMessage
		state string
		err   error
	)
	// Twice at most: a tick that finds the prequeue to shuffle shuffles it
	// to the end (or fails), and the next run of the script admits.
	for range 2 {
		vals, err = tickScript.Exec(ctx, r.client, r.Keys(id).room(), []string{batch, batch, tick}).ToArray()
		if err != nil {
			return TickResult{}, fmt.Errorf("tick %s: %w", id, err)
		}
		if len(vals) == 0 {
			return TickResult{}, fmt.Errorf("tick %s: empty script reply", id)
		}
		if state, err = vals[0].ToString(); err != nil {
			return TickResult{}, fmt.Errorf("tick %s: %w", id, err)
		}
		if state != "shuffle" {
			break
		}
		if err := r.shuffle(ctx, id); err != nil {
			return TickResult{}, fmt.Errorf("tick %s: %w", id, err)
		}
	}
	if state == "shuffle" {
		return TickResult{}, fmt.Errorf("tick %s: the prequeue is still being shuffled", id)
	}
	if state == "not_found" {
		return TickResult{}, ErrNotFound
	}
	return r.decodeTick(id, state, vals)
}

// tickHead is the values of the tick script's reply (v5) before the users
// it let in: the state, then the room's figures.
const tickHead = 10

// decodeTick decodes the reply vals of the tick script that answered state
// (neither not_found nor shuffle), signing the passes it handed out.
func (r *Rooms) decodeTick(id, state string, vals []rueidis.RedisMessage) (TickResult, error) {
	return r.decodeTickHead(id, state, vals, tickHead)
}

// decodeTickHead is decodeTick for a reply whose users start after head
// values: tickHead, or 8 for the previous versions' (v1–v4), which carry
// neither Joined nor the prequeue (both left 0, and Waiting with them).
func (r *Rooms) decodeTickHead(id, state string, vals []rueidis.RedisMessage, head int) (TickResult, error) {
	var err error
	if len(vals) < head || (len(vals)-head)%3 != 0 {
		return TickResult{}, fmt.Errorf("tick %s: malformed script reply (%d values)", id, len(vals))
	}
	var buf [tickHead - 1]int64
	n := buf[:head-1]
	for i := range n {
		if n[i], err = vals[i+1].AsInt64(); err != nil {
			return TickResult{}, fmt.Errorf("tick %s: %w", id, err)
		}
	}
	res := TickResult{State: state, Now: n[0], Admitted: n[1], Cursor: n[2], Skipped: n[3],
		Allowed: n[4], Remaining: n[5], Live: n[6]}
	if head >= tickHead {
		res.Joined = n[7]
		res.Waiting = n[7] - res.Cursor + n[8]
	}
	for i := head; i+2 < len(vals); i += 3 {
		user, err1 := vals[i].ToString()
		pass, err2 := vals[i+1].AsInt64()
		exp, err3 := vals[i+2].AsInt64()
		if err := errors.Join(err1, err2, err3); err != nil {
			return res, fmt.Errorf("tick %s: %w", id, err)
		}
		p := Pass{Promotion: id, User: user, ID: pass, ExpiresAt: time.UnixMilli(exp).UTC()}
		res.New = append(res.New, Admission{Pass: p, Token: r.signer.Sign(p)})
	}
	return res, nil
}

// Verify checks an entry token of userID for promotion id against the
// local clock (see Signer.Verify); the spend, judged against Redis TIME,
// has the last word.
func (r *Rooms) Verify(id, userID, token string) (Pass, error) {
	return r.signer.Verify(id, userID, token, time.Now())
}

// Spend verifies token and spends its pass: it lets its user in once. It
// answers ErrForged, ErrNotYours, ErrExpired, ErrSpent or ErrUnknownPass
// when the token does not let userID in. The claim path spends the pass
// inside the claim script instead (see PassLua), so that the pass and the
// unit go together; Spend is the same check on its own.
func (r *Rooms) Spend(ctx context.Context, id, userID, token string) (Pass, error) {
	p, err := r.Verify(id, userID, token)
	if err != nil {
		return Pass{}, err
	}
	out, err := SpendScript.Exec(ctx, r.client, r.Keys(id).SpendKeys(),
		[]string{strconv.FormatInt(p.ID, 10), userID}).ToString()
	if err != nil {
		return Pass{}, fmt.Errorf("spend pass %d of %s in %s: %w", p.ID, userID, id, err)
	}
	if out == "ok" {
		return p, nil
	}
	if e, ok := outcomes[out]; ok {
		return Pass{}, e
	}
	return Pass{}, fmt.Errorf("spend pass %d of %s in %s: unexpected outcome %q", p.ID, userID, id, out)
}

// Counts are a room's counters, for the promotion object and metrics.
type Counts struct {
	// Joined is the places handed out.
	Joined int64
	// Waiting is the places not yet reached by admission (users who
	// abandoned ahead of being reached included), and, until the shuffle
	// seals it, the users the prequeue collected.
	Waiting int64
	// Admitted is the passes handed out.
	Admitted int64
	// PassesSpent is the passes spent by claims.
	PassesSpent int64
	// PassesExpired is the passes that expired unspent and gave their unit
	// back.
	PassesExpired int64
	// Abandoned is the places skipped by admission.
	Abandoned int64
	// Prequeue is the users collected by the room's opening moment (0
	// without one); they count in Joined once shuffled.
	Prequeue int64
}

// Counts reads promotion id's room counters; ErrNotFound if it is missing.
func (r *Rooms) Counts(ctx context.Context, id string) (Counts, error) {
	k := r.Keys(id)
	res := r.client.DoMulti(ctx,
		r.client.B().Hmget().Key(k.Meta()).Field("admitted", "cursor", "skipped", "spent", "expired", "pq").Build(),
		r.client.B().Get().Key(k.Seq()).Build(),
		r.client.B().Scard().Key(k.Prequeue()).Build())
	vals, err := res[0].ToArray()
	if err != nil {
		return Counts{}, fmt.Errorf("counts of %s: %w", id, err)
	}
	if len(vals) < 6 || vals[0].IsNil() {
		return Counts{}, ErrNotFound
	}
	var n [5]int64
	for i := range n {
		n[i], _ = vals[i].AsInt64()
	}
	joined, err := res[1].AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return Counts{}, fmt.Errorf("counts of %s: %w", id, err)
	}
	pre, err := res[2].AsInt64()
	if err != nil {
		return Counts{}, fmt.Errorf("counts of %s: %w", id, err)
	}
	waiting := joined - n[1]
	if pq, _ := vals[5].ToString(); pq == "open" {
		// Not sealed yet: the collected users have no places, but they
		// wait all the same.
		waiting += pre
	}
	return Counts{Joined: joined, Waiting: waiting, Admitted: n[0], Abandoned: n[2],
		PassesSpent: n[3], PassesExpired: n[4], Prequeue: pre}, nil
}
