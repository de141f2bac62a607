package promotion

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/store"
)

// Redis is fast, the database is the truth. When Redis loses writes — a
// flush, a restart without its append-only file, a crash under appendfsync
// everysec, a failover to an empty or lagging replica — a promotion's
// counters in Redis fall below what the database already holds, and claims
// admitted on them would reuse ranks and let users claim twice. The Manager
// detects that in two ways and rebuilds the counters from the database:
//
//   - opening a promotion whose meta hash is missing while the database
//     holds claims of it creates the meta hash paused (see open), so not one
//     claim is admitted before the rebuild;
//   - every re-check compares the database's highest rank with Redis's rank
//     counter for every undrained promotion (one indexed query for all of
//     them and one pipelined round trip): a counter below the database's
//     rank means Redis lost its last writes (losses keep Redis's history a
//     prefix of what it was, so the counter is the first thing to fall).
//
// A rebuild pauses the promotion (claims and grants answer
// claim.ErrRebuilding, which the API maps to 503 unavailable with
// Retry-After), merges the database's claims page by page
// (claim.RestoreChunk per page, so memory stays bounded whatever the
// promotion's size), raises the rank counter to the database's highest rank
// and resumes. Merges never lower anything, so a rebuild can run twice, on
// two instances, or over live state without harm. One rebuild holds a
// promotion at a time (a hold in Redis that expires if its process dies);
// a promotion left paused by a dead process is taken over by the next
// re-check of any instance.

// DefaultRebuildHold is how long a rebuild holds a paused promotion without
// progress before another instance may take it over.
const DefaultRebuildHold = claim.DefaultRebuildLease

// releaseTimeout bounds giving up a hold after a rebuild failed.
const releaseTimeout = 2 * time.Second

// RebuildReport tells what one rebuild of a promotion's Redis counters did.
type RebuildReport struct {
	PromotionID string
	// Reason is why the rebuild ran.
	Reason string
	// Created is true when Redis had lost the promotion entirely.
	Created bool
	// Claims is the number of claims read from the database.
	Claims int64
	// Floor is the database's highest rank; Seq the rank counter after the
	// rebuild (at least Floor).
	Floor, Seq int64
	// Restored counts what the merge changed in Redis.
	Restored claim.RestoreStats
	// Took is how long the promotion was paused by this rebuild.
	Took time.Duration
	// Err is nil when the promotion was rebuilt and resumed.
	// claim.ErrRebuildBusy means another process holds the rebuild.
	Err error
}

// rebuilder runs a Manager's background rebuilds: at most one per promotion
// in this process. Its zero value is ready; the first rebuild starts it,
// stop ends it (before any rebuild too), and a stopped rebuilder begins
// none. Its lifecycle is a startstop.Base whose loop, the keeper, waits for
// stop, then cancels the rebuilds and waits for them.
type rebuilder struct {
	// m is the Manager the rebuilds are for: its gate, store and loop.
	m       *Manager
	life    startstop.Base
	mu      sync.Mutex
	running map[string]bool      // promotions being rebuilt; written by begin and end under mu
	ended   map[string]time.Time // when a rebuild of each promotion last ended; under mu
	ctx     context.Context      // the rebuilds' context; set by the first begin under mu
	cancel  context.CancelFunc   // called by the keeper under mu
	wg      sync.WaitGroup       // the rebuilds; Add under mu, before the keeper waits
}

// begin reserves promotion id for a rebuild and returns the context to run
// it in, or false if one is running already or the rebuilder stopped.
func (r *rebuilder) begin(id string) (context.Context, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.running = make(map[string]bool)
		if err := r.life.Start(r.keep); err != nil {
			r.cancel() // stopped before its first rebuild
		}
	}
	select {
	case <-r.life.Stopping():
		return nil, false
	default:
	}
	if r.running[id] {
		return nil, false
	}
	r.running[id] = true
	r.wg.Add(1)
	return r.ctx, true
}

// keep is the rebuilder's loop: once stopping, it cancels the rebuilds and
// waits for them. It takes mu to cancel, so every begin that got in before
// the stop has added to wg before keep waits on it.
func (r *rebuilder) keep(stopping <-chan struct{}) {
	<-stopping
	r.mu.Lock()
	r.cancel()
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *rebuilder) end(id string) {
	r.mu.Lock()
	delete(r.running, id)
	if r.ended == nil || len(r.ended) >= maxRemembered {
		r.ended = make(map[string]time.Time)
	}
	r.ended[id] = time.Now()
	r.mu.Unlock()
	r.wg.Done()
}

func (r *rebuilder) busy(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id]
}

// endedAfter reports whether a rebuild of promotion id ended after t.
func (r *rebuilder) endedAfter(id string, t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended[id].After(t)
}

// stop cancels the running rebuilds and waits for them; their promotions
// stay paused, with the hold given up, for the next process to finish.
func (r *rebuilder) stop() {
	_ = r.life.Stop(context.Background()) // no deadline: a rebuild ends soon after its context
}

// opener makes a promotion's Redis state exist (its meta hash, its
// segments, its waiting room, its code pool's cap), paused for a rebuild
// when the database holds claims Redis lost. Run by the loop, and by a
// request when no loop runs.
type opener struct{ m *Manager }

// open makes the promotion's Redis state exist. If the database
// holds claims of the promotion and Redis has no meta hash for it, Redis
// lost it: the meta hash is created paused and a rebuild starts.
//
// The rank counter is left as it is: only a rebuild's Resume raises it to
// the database's floor, once the users are restored too. Raised here, it
// would hide a loss from the re-check, which detects one by the counter
// being behind the database.
func (op *opener) open(ctx context.Context, p Promotion) error {
	floors, err := op.m.st.MaxRanks(ctx, []string{p.ID})
	if err != nil {
		return fmt.Errorf("open promotion %s: %w", p.ID, err)
	}
	return op.openAt(ctx, p, floors[p.ID])
}

// openAt is open with the database's highest rank of the promotion already
// read. On a promotion Redis still holds it refreshes its end and closed
// flag, nothing else.
func (op *opener) openAt(ctx context.Context, p Promotion, floor int64) error {
	if err := op.openRoom(ctx, p); err != nil {
		return err
	}
	if p.segmented() {
		return op.openSegments(ctx, p, floor)
	}
	// The stock Redis is given is capped by the code pool, read afresh
	// (unknown: 0 until the re-check reads it).
	_ = op.poolCodes(ctx, &p)
	floor = op.knownFloor(p, floor)
	if floor == 0 {
		// The database knows no claim of it: there is nothing to rebuild
		// from, and a new promotion must not start paused.
		_, err := op.m.gate.Open(ctx, p.gate())
		return err
	}
	created, err := op.m.gate.OpenRebuilding(ctx, p.gate())
	if err != nil {
		return err
	}
	if created {
		op.m.log.Warn("promotion state is missing in Redis though the database holds its claims: claims are paused until it is rebuilt",
			"promotion", p.ID, "database_max_rank", floor)
		op.m.rb.startRebuild(p, reasonMissing, true)
	}
	return nil
}

// checkFloors compares, for every promotion in list, the database's highest
// rank with Redis's rank counter, and starts a rebuild where Redis is
// behind or a promotion is paused with no rebuild running here. Promotions
// Redis lost entirely are opened (paused) and rebuilt, and those in refresh
// (seen for the first time) are opened, with the floors read here. It
// returns the marks it read, one per promotion of list (nil if it could
// not read them).
func (l *loop) checkFloors(ctx context.Context, list []Promotion, refresh map[string]bool) ([]claim.Mark, error) {
	if len(list) == 0 {
		return nil, nil
	}
	ids := make([]string, len(list))
	for i, p := range list {
		ids[i] = p.ID
	}
	// The fences are read before Redis's counters: a rank answered after
	// the counters were read is above them without any loss. Redis's
	// confirmed ranks are read before the database: a rank confirmed after
	// the database was read is in it without any loss.
	known := make([]int64, len(list))
	for i, p := range list {
		known[i] = l.m.fences.get(p.ID)
	}
	confirmed, err := l.gate.Confirmed(ctx, ids)
	var floors map[string]int64
	if err == nil {
		floors, err = l.st.MaxRanks(ctx, ids)
	}
	var marks []claim.Mark
	if err == nil {
		marks, err = l.gate.Marks(ctx, ids)
	}
	if err != nil {
		// Still open the new ones, one by one.
		errs := []error{fmt.Errorf("check rank floors: %w", err)}
		for _, p := range list {
			if refresh[p.ID] {
				errs = append(errs, l.m.op.open(ctx, p))
			}
		}
		return nil, errors.Join(errs...)
	}
	var errs []error
	for i, p := range list {
		l.confirmedSeen[p.ID] = confirmed[i]
		l.m.fences.raise(p.ID, floors[p.ID])
		mk, floor := marks[i], max(floors[p.ID], known[i])
		if refresh[p.ID] || !mk.Exists {
			if err := l.m.op.openAt(ctx, p, floor); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		switch {
		case p.segmented():
			// Segments are not rebuilt from the database (segments.go).
		case l.m.rb.busy(p.ID), !mk.Exists:
		case mk.Halted != "":
			// Halted for an operator: only a requested rebuild resumes it.
		case mk.Rebuilding:
			// A rebuild runs elsewhere (its counter is raised only when it
			// resumes), or its owner died: take over once its hold expires.
			l.m.rb.startRebuild(p, reasonOrphaned, false)
		case floor > mk.Seq:
			l.log.Warn("Redis lost writes: its rank counter is behind the highest rank known to be taken; pausing claims to rebuild",
				"promotion", p.ID, "redis_seq", mk.Seq, "known_max_rank", floor, "lost_ranks", floor-mk.Seq)
			l.m.rb.startRebuild(p, reasonBehind, false)
		case confirmed[i] > floors[p.ID]:
			errs = append(errs, l.m.rb.halt(ctx, p.ID, confirmed[i], floors[p.ID]))
			continue
		}
		if l.cfg.OnHalted != nil && mk.Exists {
			l.cfg.OnHalted(p.ID, mk.Halted != "")
		}
	}
	return marks, errors.Join(errs...)
}

// halt stops claims of a promotion whose database lost claims Redis saw
// confirmed into it: the database was restored from an older backup, or
// failed over to a lagging replica. Rebuilding from it would hand the lost
// claims' units out again, and reconciling silently would hide that users
// hold claims the database no longer knows; so the promotion waits for an
// operator, who restores the database or accepts it with a requested
// rebuild (see docs/failure-modes.md).
func (rb *rebuilder) halt(ctx context.Context, id string, confirmed, floor int64) error {
	reason := fmt.Sprintf("database behind Redis: rank %d was confirmed into it, its highest rank is %d", confirmed, floor)
	halted, err := rb.m.gate.Halt(ctx, id, reason)
	if err != nil {
		return err
	}
	if halted {
		rb.m.log.Error("the database lost claims it had confirmed (restored from an older backup, or a lagging replica?): claims of the promotion are halted until an operator restores the database or requests a rebuild",
			"promotion", id, "redis_confirmed_rank", confirmed, "database_max_rank", floor, "missing_ranks_at_least", confirmed-floor)
	}
	if rb.m.cfg.OnHalted != nil {
		rb.m.cfg.OnHalted(id, true)
	}
	return nil
}

// Reasons of a rebuild, as RebuildReport.Reason gives them.
const (
	reasonMissing = "promotion missing in Redis"
	reasonBehind  = "rank counter behind the database"
	// reasonOrphaned: found rebuilding with no rebuild running (its
	// owner died). The text keeps the word reports first gave it.
	reasonOrphaned  = "paused with no rebuild running"
	reasonRequested = "requested"
	reasonFenced    = "rank counter below a rank known to be taken"
	reasonCollision = "a rank was handed out twice"
	reasonJournal   = "claims this instance answered are missing"
)

// startRebuild rebuilds the promotion in the background unless a rebuild
// of it runs in this process already; created tells that the caller had to
// create its meta hash. Stop ends it.
func (rb *rebuilder) startRebuild(p Promotion, reason string, created bool) {
	rb.startRebuildWith(p.ID, func(context.Context) (Promotion, error) { return p, nil }, reason, created)
}

func (rb *rebuilder) startRebuildWith(id string, def func(context.Context) (Promotion, error), reason string, created bool) {
	ctx, ok := rb.begin(id)
	if !ok {
		return
	}
	// Redis lost writes (or an operator asked): the journals read every
	// claim they hold at their next prune, not only the oldest.
	rb.m.jr.verify.Store(true)
	go func() {
		defer rb.end(id)
		p, err := def(ctx)
		if err != nil {
			rb.m.log.Warn("cannot rebuild promotion; the next re-check retries", "promotion", id, "err", err)
			return
		}
		rep := rb.rebuild(ctx, p, reason, created)
		switch {
		case rep.Err == nil:
			rb.m.log.Warn("promotion rebuilt from the database and resumed",
				"promotion", p.ID, "reason", reason, "claims", rep.Claims, "database_max_rank", rep.Floor,
				"seq", rep.Seq, "users_raised", rep.Restored.Users, "statuses", rep.Restored.Statuses,
				"voided", rep.Restored.Voided, "requeued", rep.Restored.Requeued, "paused_for", rep.Took)
			if rep.Restored.Requeued > 0 {
				rb.m.wk.wakePool(p.ID)
			}
		case errors.Is(rep.Err, claim.ErrNotRebuilding):
			rb.m.log.Debug("promotion was resumed meanwhile; nothing to take over", "promotion", p.ID)
		case errors.Is(rep.Err, claim.ErrHalted):
			rb.m.log.Debug("promotion is halted for an operator; not rebuilding it", "promotion", p.ID)
		case errors.Is(rep.Err, claim.ErrRebuildBusy):
			rb.m.log.Debug("promotion is being rebuilt by another instance", "promotion", p.ID)
		case ctx.Err() != nil:
			rb.m.log.Info("rebuild interrupted by shutdown; the promotion stays paused for the next start", "promotion", p.ID)
		default:
			rb.m.log.Warn("rebuild failed; the promotion stays paused and the next re-check retries",
				"promotion", p.ID, "reason", reason, "err", rep.Err)
		}
		if rb.m.cfg.OnRebuild != nil {
			rb.m.cfg.OnRebuild(rep)
		}
	}()
}

// Rebuild pauses the promotion, rebuilds its Redis counters from the
// database and resumes it, now, and reports what it did (an operator's
// repair tool; the Manager rebuilds by itself when it detects a loss). It
// also lifts a halt (see Config.OnHalted): the operator accepts the
// database as what claims go on from. It returns ErrRebuildBusy if a
// rebuild of it runs elsewhere or in this process, or if the Manager was
// stopped.
func (m *Manager) Rebuild(ctx context.Context, id string) (RebuildReport, error) {
	p, err := m.load(ctx, id)
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

// rebuild runs one rebuild of p: pause, merge the database's claims page by
// page, raise the rank counter to the database's highest rank, resume. On
// failure the hold is given up and the promotion stays paused. created
// tells that Redis was found without the promotion before this call.
func (rb *rebuilder) rebuild(ctx context.Context, p Promotion, reason string, created bool) (rep RebuildReport) {
	start := rb.m.cfg.Now()
	rep = RebuildReport{PromotionID: p.ID, Reason: reason, Created: created}
	defer func() { rep.Took = rb.m.cfg.Now().Sub(start) }()
	if p.retired() {
		// Retired is not lost: its Redis state was deleted on purpose.
		rep.Err = errRetired
		return rep
	}

	// The rank counter is raised by Resume, not by BeginRebuild (no SeqFloor):
	// raised before the rebuild is done, it would hide the loss from the
	// next re-check if this rebuild failed in between.
	begin := rb.m.gate.BeginRebuild
	switch reason {
	case reasonOrphaned, reasonFenced:
		begin = rb.m.gate.TakeOver
	case reasonRequested:
		begin = rb.m.gate.BeginRebuildHalted
	}
	if err := rb.m.op.poolCodes(ctx, &p); err != nil {
		rep.Err = err
		return rep
	}
	r, err := begin(ctx, p.gate(), rb.m.cfg.Instance, DefaultRebuildHold)
	if err != nil {
		rep.Err = err
		return rep
	}
	rep.Created = rep.Created || r.Created()
	if err := rb.restoreAll(ctx, p, r, &rep); err != nil {
		rep.Err = err
		// Give the hold up so the next re-check starts over at once; a hold
		// another rebuild took is not ours, and Release leaves it alone.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if rerr := r.Release(rctx); rerr != nil {
			rep.Err = errors.Join(err, rerr)
		}
		return rep
	}
	return rep
}

// restoreAll merges every claim the database holds, then resumes with the
// database's highest rank, read after the merge, as the floor. A rank the
// database gains after that read (an issuer's batch still in flight from
// before the loss) puts the counter behind again, and the next re-check
// rebuilds once more.
func (rb *rebuilder) restoreAll(ctx context.Context, p Promotion, r *claim.Rebuild, rep *RebuildReport) error {
	var after int64
	known := make([]claim.Known, 0, claim.RestoreChunk)
	for {
		page, err := rb.m.st.ClaimsByRank(ctx, p.ID, after, claim.RestoreChunk)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		known = known[:0]
		for _, c := range page {
			if k, ok := knownClaim(c); ok {
				known = append(known, k)
			}
		}
		st, err := r.Restore(ctx, known)
		if err != nil {
			return err
		}
		rep.Restored.Add(st)
		rep.Claims += int64(len(page))
		after = page[len(page)-1].Rank
	}
	floors, err := rb.m.st.MaxRanks(ctx, []string{p.ID})
	if err != nil {
		return err
	}
	// The fence covers ranks this instance answered or confirmed that the
	// database may not show yet: Redis's counter must not fall below them.
	rep.Floor = rb.m.op.knownFloor(p, floors[p.ID])
	seq, err := r.Resume(ctx, rep.Floor)
	if err != nil {
		return err
	}
	rep.Seq = seq
	return nil
}

// knownClaim turns a database claim into what the gate restores. A replayed
// dead letter with no issued row is a claim an admin put back into the
// pipeline: it is restored pending, to be enqueued again if Redis lost it.
func knownClaim(c store.KnownClaim) (claim.Known, bool) {
	k := claim.Known{Rank: c.Rank, UserID: c.UserID, Slot: c.Slot, ClaimID: c.ClaimID}
	switch c.State {
	case store.StateIssued:
		k.Status, k.IssuedAt = claim.StatusIssued, c.At
		if k.IssuedAt.IsZero() {
			// The database's time could not be read: the claim is issued
			// all the same, at a time the rebuild stands in for.
			k.IssuedAt = time.Now()
		}
	case store.DeadFailed:
		k.Status = claim.StatusFailed
	case store.DeadVoided:
		k.Status = claim.StatusVoided
	case store.DeadReplayed:
		k.Status, k.AcceptedAt = claim.StatusPending, c.At
		if ms, err := strconv.ParseInt(c.Fields["at"], 10, 64); err == nil {
			k.AcceptedAt = time.UnixMilli(ms)
		}
	default:
		return k, false
	}
	// A row that cannot be restored (no user: an undecodable entry) holds
	// its rank through the floor all the same.
	return k, c.Rank > 0 && c.Slot > 0 && c.UserID != ""
}
