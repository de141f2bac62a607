package waitroom

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/internal/startstop"
)

// releaseTimeout bounds giving the leases up when the scheduler stops.
const releaseTimeout = time.Second

// Scheduler advances admission in every room the instance knows
// (Config.Known) every TickInterval: each round takes the list from memory
// (nothing in Redis lists the rooms: neither KEYS, SCAN nor a registry set)
// and hands each room's tick to a bounded worker pool; when no worker is
// idle the round runs the room itself (caller-runs), so a full pool slows
// the rounds down instead of queueing work. At most one round runs at a
// time: a tick that comes while the previous round still runs is skipped,
// never queued behind it. Across instances a room is ticked by the holder
// of its lease (Keys.Lease), which another instance takes over once it
// lapses.
//
// A room is left alone before its Known.Starts, and after a tick saw its
// promotion ended, until its Known entry changes or while its Known.Ends
// is still ahead: so an ended room costs one tick, and a promotion
// reopened by a later end (or whose end this instance's clock has not
// reached) is ticked again at once. An instance that knows no room sends
// Redis nothing.
type Scheduler struct {
	rooms *Rooms
	loop  *loop
	now   func() time.Time

	// marks holds each room's hintMark of its last tick here (room id →
	// hintMark). A room is ticked by one worker at a time (rounds never
	// overlap), which alone writes its entry.
	marks sync.Map
	// ended holds the rooms whose last tick here saw their promotion
	// ended (room id → the Known entry they were ticked with); written by
	// the room's tick, read and pruned by the round.
	ended sync.Map
	// entries holds the Known entry each room of the round in flight was
	// listed with (room id → Known); written by the round before it hands
	// the rooms out.
	entries sync.Map

	// life runs the loop, which owns the scheduler's state (the round in
	// flight, the rooms of the last round).
	life startstop.Base
}

// NewScheduler returns the scheduler of rooms, configured by rooms' Config.
func NewScheduler(rooms *Rooms) *Scheduler {
	s := &Scheduler{rooms: rooms, now: time.Now}
	s.loop = &loop{
		interval: rooms.cfg.TickInterval,
		workers:  rooms.cfg.Workers,
		list:     s.active,
		work:     s.tickRoom,
		finish:   s.release,
	}
	return s
}

// Start starts the scheduler; ctx's values reach the ticks, not its
// cancellation (Stop ends the scheduler). A second Start fails with
// ErrStarted, and a Start after Stop with ErrStopped.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.life.StartContext(ctx, s.loop.run)
}

// Stop stops the scheduler: no new round starts, the round in flight is
// cancelled and waited for, and the leases of this instance are given up so
// another instance takes its rooms at once. It returns ctx.Err() if ctx ends
// first (the loop then goes on returning, and giving the leases up, in the
// background).
// It is safe to call twice, and before Start.
func (s *Scheduler) Stop(ctx context.Context) error {
	return s.life.Stop(ctx)
}

// Stats counts what the scheduler did.
type Stats struct {
	// Rounds is the rounds completed.
	Rounds int64
	// Overruns is the ticks skipped because the previous round still ran.
	Overruns int64
	// CallerRuns is the room ticks the round ran itself, the pool being
	// full.
	CallerRuns int64
}

// Stats returns the scheduler's counters.
func (s *Scheduler) Stats() Stats { return s.loop.stats() }

// active lists the rooms to tick this round: the known ones, less those
// not started yet and those whose promotion a tick saw ended (unless their
// entry changed or their end is still ahead). It forgets what it held of
// rooms no longer known. No I/O.
func (s *Scheduler) active(context.Context) ([]string, error) {
	now := s.now()
	known := s.rooms.known()
	ids := make([]string, 0, len(known))
	in := make(map[string]bool, len(known))
	for _, k := range known {
		in[k.ID] = true
		s.entries.Store(k.ID, k)
		if !k.Starts.IsZero() && now.Before(k.Starts) {
			continue
		}
		if v, ok := s.ended.Load(k.ID); ok && v.(Known).same(k) && !k.Ends.After(now) {
			continue
		}
		ids = append(ids, k.ID)
	}
	for _, m := range []*sync.Map{&s.marks, &s.ended, &s.entries} {
		m.Range(func(id, _ any) bool {
			if !in[id.(string)] {
				m.Delete(id)
			}
			return true
		})
	}
	return ids, nil
}

// tickRoom is one room's work: take or renew the lease, tick, hand the
// admitted users to OnAdmit, and publish a hint (Keys.Events) if the tick
// changed what waiting users see. A tick that sees the promotion ended
// gives the lease up and has the room left alone from the next round
// (see active). The admitted users are handed over and the hint published
// before it returns.
func (s *Scheduler) tickRoom(ctx context.Context, id string) {
	r := s.rooms
	k := r.Keys(id)
	held, err := leaseScript.Exec(ctx, r.client, []string{k.Lease()},
		[]string{r.cfg.Instance, strconv.FormatInt(r.cfg.LeaseTTL.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("waiting room lease", "promotion", id, "err", err)
		}
		return
	}
	if held == 0 {
		s.marks.Delete(id)
		return
	}
	res, err := r.Tick(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		// Known but not in Redis (yet, or lost): the promotion manager
		// opens it again; until then each round asks once more.
		r.cfg.Logger.Debug("waiting room not in Redis", "promotion", id)
		s.marks.Delete(id)
		s.release(ctx, []string{id})
		return
	case err != nil:
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("waiting room tick", "promotion", id, "err", err)
		}
		return
	}
	if len(res.New) > 0 && r.cfg.OnAdmit != nil {
		r.cfg.OnAdmit(id, res.New)
	}
	if r.cfg.OnTick != nil {
		r.cfg.OnTick(id, res)
	}
	s.publish(ctx, id, res)
	if res.State != "ended" {
		s.ended.Delete(id)
		return
	}
	if e, ok := s.entries.Load(id); ok {
		s.ended.Store(id, e)
	}
	s.marks.Delete(id)
	s.release(ctx, []string{id})
}

// publish sends room id's hint when the tick res moved the line, let users
// in, or changed the state or the stock, compared with the room's last tick
// here (the first tick after taking a lease always hints).
func (s *Scheduler) publish(ctx context.Context, id string, res TickResult) {
	m := markOf(res)
	if last, ok := s.marks.Load(id); ok && last.(hintMark) == m {
		return
	}
	if err := s.rooms.hint(ctx, id, res); err != nil {
		if ctx.Err() == nil {
			s.rooms.cfg.Logger.Warn("waiting room hint", "promotion", id, "err", err)
		}
		return
	}
	s.marks.Store(id, m)
}

// release gives up this instance's leases of rooms.
func (s *Scheduler) release(ctx context.Context, rooms []string) {
	r := s.rooms
	for _, id := range rooms {
		if ctx.Err() != nil {
			return
		}
		err := releaseScript.Exec(ctx, r.client, []string{r.Keys(id).Lease()}, []string{r.cfg.Instance}).Error()
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("waiting room lease release", "promotion", id, "err", err)
		}
	}
}

// loop is the scheduler's timing core, apart from Redis: list and work are
// injected, so tests drive it with testing/synctest.
type loop struct {
	interval time.Duration
	workers  int
	list     func(ctx context.Context) ([]string, error)
	work     func(ctx context.Context, room string)
	// finish is called once the loop stopped, with the rooms of the last
	// round, for giving their leases up. Optional.
	finish func(ctx context.Context, rooms []string)

	// Counters: written by the loop and round goroutines, read by stats.
	rounds, overruns, callerRuns atomic.Int64
}

func (l *loop) stats() Stats {
	return Stats{Rounds: l.rounds.Load(), Overruns: l.overruns.Load(), CallerRuns: l.callerRuns.Load()}
}

// job is one room's tick in a round.
type job struct {
	room string
	wg   *sync.WaitGroup
}

// run owns the scheduler's state (the round in flight, the rooms of the
// last round) until ctx ends; then it waits for the round in flight and the
// workers.
func (l *loop) run(ctx context.Context) {
	// Unbuffered: a job goes to an idle worker or is run by the round.
	jobs := make(chan job)
	var workers sync.WaitGroup
	for range l.workers {
		workers.Go(func() {
			for j := range jobs {
				l.work(ctx, j.room)
				j.wg.Done()
			}
		})
	}
	t := time.NewTicker(l.interval)
	var (
		round chan []string // delivers the round's rooms when it ends; nil when none runs
		last  []string
	)
	defer func() {
		t.Stop()
		if round != nil {
			if rooms := <-round; rooms != nil {
				last = rooms
			}
		}
		close(jobs)
		workers.Wait()
		if l.finish != nil && len(last) > 0 {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			l.finish(fctx, last)
			cancel()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if round != nil {
				l.overruns.Add(1)
				continue
			}
			round = make(chan []string, 1)
			go l.round(ctx, jobs, round)
		case rooms := <-round:
			round = nil
			if rooms != nil {
				last = rooms
			}
			l.rounds.Add(1)
		}
	}
}

// round ticks every listed room once, through the pool or itself, and sends
// the rooms on done when all their ticks have returned.
func (l *loop) round(ctx context.Context, jobs chan<- job, done chan<- []string) {
	rooms, err := l.list(ctx)
	if err != nil {
		done <- nil
		return
	}
	var wg sync.WaitGroup
	for _, room := range rooms {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		j := job{room: room, wg: &wg}
		select {
		case jobs <- j:
		default:
			l.callerRuns.Add(1)
			l.work(ctx, room)
			wg.Done()
		}
	}
	wg.Wait()
	done <- rooms
}
