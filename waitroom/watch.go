package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// DefaultWatchRefresh is how often a Watcher re-reads the standings it
// watches when no hint came.
const DefaultWatchRefresh = 2 * time.Second

// resubscribeDelay is the pause before a room's hint subscription is made
// again after it failed.
const resubscribeDelay = time.Second

// ErrWatcherClosed means the Watcher is not running: not started yet, or
// stopped.
var ErrWatcherClosed = errors.New("waitroom: watcher not running")

// Events is the sharded pub/sub channel of the room's hints: the scheduler
// publishes on it after a tick that changed something, so that instances
// watching standings in the room re-read them. It carries the promotion's
// hash tag, so it lives on the room's shard of a Cluster.
func (k Keys) Events() string { return k.base + "wr:ev" }

// Final tells whether a standing with status s no longer changes by
// itself: every status but waiting and prequeue. An admitted user claims with the token;
// the others must join again, or the promotion is over.
func (s Status) Final() bool { return s != StatusWaiting && s != StatusPrequeue }

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Refresh is how often the standings watched in a room are re-read, and
	// their users checked in, when no hint came; a room whose AbandonAfter
	// is shorter than three times Refresh is re-read every third of it, so
	// a watching user never loses the place. Defaults to
	// DefaultWatchRefresh (2s).
	Refresh time.Duration
	// Logger receives the watcher's logs (never tokens). Defaults to the
	// Rooms' Logger.
	Logger *slog.Logger
}

// Watcher pushes the changes of users' standings to local watchers (a
// server-sent event stream per user, say). One goroutine owns what is
// watched; it does no I/O itself, so it answers at once:
//
//   - the ticks of this instance's scheduler hand it their admissions
//     (Admit, as Config.OnAdmit), which it passes to the watches of the
//     admitted users before Admit returns;
//   - per room with at least one watch it holds one sharded subscription
//     (SSUBSCRIBE Keys.Events); on a hint from the scheduler of any
//     instance it re-reads the standings watched in the room, all of them
//     in one pipelined round;
//   - hints are hints only: every room's standings are also re-read every
//     Refresh, and every re-read checks the users in.
//
// A Watch holds the latest standing only: a watcher that reads slowly skips
// to the newest and never holds up the Watcher or a tick.
type Watcher struct {
	rooms *Rooms
	cfg   WatcherConfig

	// Inputs of the loop goroutine, which owns every watch and room.
	subscribe   chan *Watch
	unsubscribe chan *Watch
	admit       chan admitMsg
	hints       chan string
	results     chan refreshResult

	watches atomic.Int64 // open watches; written by the loop

	// mu guards the lifecycle fields.
	mu      sync.Mutex
	cancel  context.CancelFunc
	running chan struct{} // closed by Start
	exited  chan struct{} // closed when the loop returned
	stopped bool
}

// NewWatcher returns a Watcher of rooms' standings. Start it before use.
func NewWatcher(rooms *Rooms, cfg WatcherConfig) *Watcher {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultWatchRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = rooms.cfg.Logger
	}
	return &Watcher{
		rooms:       rooms,
		cfg:         cfg,
		subscribe:   make(chan *Watch),
		unsubscribe: make(chan *Watch),
		admit:       make(chan admitMsg),
		hints:       make(chan string),
		results:     make(chan refreshResult),
		running:     make(chan struct{}),
		exited:      make(chan struct{}),
	}
}

// Start starts the watcher's loop. It returns an error if it was started or
// stopped before.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil || w.stopped {
		return errors.New("waitroom: watcher already started")
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	close(w.running)
	go func() {
		defer close(w.exited)
		w.run(ctx)
	}()
	return nil
}

// Stop stops the watcher: its subscriptions end, the re-reads in flight are
// cancelled and waited for. Open watches get no more updates (their
// channels stay open; close them). It returns ctx.Err() if ctx ends first.
// It is safe to call twice, and before Start.
func (w *Watcher) Stop(ctx context.Context) error {
	w.mu.Lock()
	w.stopped = true
	cancel := w.cancel
	w.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-w.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Watches is the number of open watches.
func (w *Watcher) Watches() int64 { return w.watches.Load() }

// Watch is one watcher of a user's standing, from Watcher.Watch. Its
// updates hold the latest standing only.
type Watch struct {
	promotion, user string
	w               *Watcher
	c               chan Standing // buffer 1; sent to by the loop only
	final           bool          // a final standing was sent; owned by the loop
	once            sync.Once
}

// Updates delivers the user's standing each time it may have changed, the
// latest one only: a reader that falls behind skips to the newest. After a
// final standing (Status.Final) nothing more is sent. The admitted standing
// pushed by a tick has a zero Now.
func (s *Watch) Updates() <-chan Standing { return s.c }

// Done is closed when the Watcher stops: no more updates come. A stream
// fed by the watch should end then, so that its client reconnects to an
// instance that runs.
func (s *Watch) Done() <-chan struct{} { return s.w.exited }

// Close stops the watch. It is safe to call twice, and after the Watcher
// stopped.
func (s *Watch) Close() {
	s.once.Do(func() {
		select {
		case s.w.unsubscribe <- s:
		case <-s.w.exited:
		}
	})
}

// Watch starts watching userID's standing in promotion id's room. It reads
// nothing: read the standing once after Watch returns (Rooms.Status), so
// that no change between the read and the watch is missed. ErrWatcherClosed
// if the watcher is not running.
func (w *Watcher) Watch(id, userID string) (*Watch, error) {
	s := &Watch{promotion: id, user: userID, w: w, c: make(chan Standing, 1)}
	select {
	case <-w.running:
	default:
		return nil, ErrWatcherClosed
	}
	select {
	case w.subscribe <- s:
		return s, nil
	case <-w.exited:
		return nil, ErrWatcherClosed
	}
}

// admitMsg hands a tick's admissions to the loop; done is closed once they
// are passed to the watches.
type admitMsg struct {
	id       string
	admitted []Admission
	done     chan struct{}
}

// Admit passes the users a tick of promotion id let in to their watches,
// with their entry tokens, before it returns. Use it as Config.OnAdmit. It
// does nothing on a nil or stopped Watcher.
func (w *Watcher) Admit(id string, admitted []Admission) {
	if w == nil || len(admitted) == 0 {
		return
	}
	select {
	case <-w.running:
	default:
		return
	}
	m := admitMsg{id: id, admitted: admitted, done: make(chan struct{})}
	select {
	case w.admit <- m:
		<-m.done
	case <-w.exited:
	}
}

// watchRoom is what the loop keeps of one room with watches.
type watchRoom struct {
	id         string
	users      map[string]map[*Watch]struct{}
	cancel     context.CancelFunc // ends the room's subscription
	refreshing bool               // a re-read is in flight
	dirty      bool               // a hint came during the re-read
	every      time.Duration      // fallback period of the re-reads
	due        time.Time          // the next fallback re-read
}

// refreshResult is a room's re-read, sent by its refresh goroutine.
type refreshResult struct {
	room      *watchRoom
	started   time.Time
	standings map[string]Standing
	abandon   time.Duration // the room's AbandonAfter, 0 if unknown
}

// run is the loop: it owns the rooms and their watches until ctx ends,
// then waits for the goroutines it started.
func (w *Watcher) run(ctx context.Context) {
	rooms := map[string]*watchRoom{}
	var wg sync.WaitGroup
	timer := time.NewTimer(w.cfg.Refresh)
	defer func() {
		timer.Stop()
		for _, room := range rooms {
			room.cancel()
		}
		wg.Wait()
		w.watches.Store(0)
	}()
	refresh := func(room *watchRoom) {
		users := make([]string, 0, len(room.users))
		for u, ws := range room.users {
			for s := range ws {
				if !s.final {
					users = append(users, u)
					break
				}
			}
		}
		room.refreshing, room.dirty = true, false
		wg.Go(func() { w.refresh(ctx, room, users) })
	}
	for {
		now := time.Now()
		next := now.Add(w.cfg.Refresh)
		for _, room := range rooms {
			if !room.refreshing && room.due.Before(next) {
				next = room.due
			}
		}
		timer.Reset(max(next.Sub(now), 0))
		select {
		case <-ctx.Done():
			return
		case s := <-w.subscribe:
			room := rooms[s.promotion]
			if room == nil {
				now := time.Now()
				rctx, cancel := context.WithCancel(ctx)
				room = &watchRoom{id: s.promotion, users: map[string]map[*Watch]struct{}{}, cancel: cancel,
					every: w.cfg.Refresh, due: now}
				// The first re-read comes at once: it learns the room's
				// abandonment time, which may call for shorter periods.
				rooms[s.promotion] = room
				wg.Go(func() { w.listen(rctx, room.id) })
			}
			if room.users[s.user] == nil {
				room.users[s.user] = map[*Watch]struct{}{}
			}
			room.users[s.user][s] = struct{}{}
			w.watches.Add(1)
		case s := <-w.unsubscribe:
			room := rooms[s.promotion]
			if room == nil {
				continue
			}
			if _, ok := room.users[s.user][s]; !ok {
				continue
			}
			w.watches.Add(-1)
			delete(room.users[s.user], s)
			if len(room.users[s.user]) == 0 {
				delete(room.users, s.user)
			}
			if len(room.users) == 0 {
				room.cancel()
				delete(rooms, s.promotion)
			}
		case m := <-w.admit:
			if room := rooms[m.id]; room != nil {
				for _, a := range m.admitted {
					deliver(room.users[a.Pass.User], Standing{Status: StatusAdmitted, Pass: a.Pass, Token: a.Token})
				}
			}
			close(m.done)
		case id := <-w.hints:
			switch room := rooms[id]; {
			case room == nil:
			case room.refreshing:
				room.dirty = true
			default:
				refresh(room)
			}
		case res := <-w.results:
			room := res.room
			if rooms[room.id] != room {
				continue // the room's watches all closed meanwhile
			}
			room.refreshing = false
			room.every = refreshEvery(w.cfg.Refresh, res.abandon)
			room.due = res.started.Add(room.every)
			for u, st := range res.standings {
				deliver(room.users[u], st)
			}
			if room.dirty {
				refresh(room)
			}
		case <-timer.C:
			now := time.Now()
			for _, room := range rooms {
				if !room.refreshing && !room.due.After(now) {
					refresh(room)
				}
			}
		}
	}
}

// refreshEvery is a room's fallback period: refresh, or a third of the
// room's abandonment time if that is shorter, so that the re-reads (which
// check the users in) keep every watching user's place. At least 1ms.
func refreshEvery(refresh, abandon time.Duration) time.Duration {
	if abandon > 0 && abandon/3 < refresh {
		refresh = abandon / 3
	}
	return max(refresh, time.Millisecond)
}

// deliver hands st to every watch of a user, replacing a standing not yet
// read. Watches that got a final standing get nothing more. Called by the
// loop only, the one sender, so the replacement cannot block.
func deliver(watches map[*Watch]struct{}, st Standing) {
	for s := range watches {
		if s.final {
			continue
		}
		select {
		case s.c <- st:
		default:
			select {
			case <-s.c:
			default:
			}
			s.c <- st
		}
		s.final = st.Status.Final()
	}
}

// listen holds room id's hint subscription until ctx ends, subscribing
// again after a failure, and passes each hint to the loop.
func (w *Watcher) listen(ctx context.Context, id string) {
	c := w.rooms.client
	ch := w.rooms.Keys(id).Events()
	for {
		err := c.Receive(ctx, c.B().Ssubscribe().Channel(ch).Build(), func(rueidis.PubSubMessage) {
			select {
			case w.hints <- id:
			case <-ctx.Done():
			}
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.cfg.Logger.Warn("waiting room hints", "promotion", id, "err", err)
		}
		t := time.NewTimer(resubscribeDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// refresh re-reads the standings of users in room, checking them in, in
// one pipelined round, and sends them to the loop.
func (w *Watcher) refresh(ctx context.Context, room *watchRoom, users []string) {
	res := refreshResult{room: room, started: time.Now()}
	var err error
	res.standings, res.abandon, err = w.rooms.statuses(ctx, room.id, users)
	if err != nil && ctx.Err() == nil {
		w.cfg.Logger.Warn("waiting room watch", "promotion", room.id, "err", err)
	}
	select {
	case w.results <- res:
	case <-ctx.Done():
	}
}

// statuses answers the standings of users in promotion id's room, checking
// each in, in one pipelined round with the room's abandonment time. Users
// who never joined, or whose room is gone, are left out; so are those whose
// standing could not be read, the first such error being returned with the
// rest.
func (r *Rooms) statuses(ctx context.Context, id string, users []string) (map[string]Standing, time.Duration, error) {
	k := r.Keys(id)
	var abandon time.Duration
	ms, err := r.client.Do(ctx, r.client.B().Hget().Key(k.Meta()).Field("abandon_ms").Build()).AsInt64()
	if err == nil {
		abandon = time.Duration(ms) * time.Millisecond
	} else if !rueidis.IsRedisNil(err) {
		return nil, 0, err
	}
	if len(users) == 0 {
		return nil, abandon, nil
	}
	execs := make([]rueidis.LuaExec, len(users))
	keys := k.room()
	for i, u := range users {
		execs[i] = rueidis.LuaExec{Keys: keys, Args: []string{u, "1"}}
	}
	out := make(map[string]Standing, len(users))
	var first error
	for i, res := range statusScript.ExecMulti(ctx, r.client, execs...) {
		vals, err := res.ToArray()
		if err == nil {
			var st Standing
			if st, err = r.standing(id, users[i], vals); err == nil {
				out[users[i]] = st
				continue
			}
		}
		if errors.Is(err, ErrNotJoined) || errors.Is(err, ErrNotFound) {
			continue // a watch of a request refused: nothing to tell, nothing to log
		}
		if first == nil {
			first = fmt.Errorf("status of %s in %s: %w", users[i], id, err)
		}
	}
	return out, abandon, first
}

// hintMark is what a tick saw that a watching user's standing depends on;
// the scheduler publishes a hint when it differs from the room's last.
type hintMark struct {
	state                             string
	cursor, admitted, remaining, live int64
}

func markOf(res TickResult) hintMark {
	return hintMark{state: res.State, cursor: res.Cursor, admitted: res.Admitted, remaining: res.Remaining, live: res.Live}
}

// hint publishes a hint on room id's channel (SPUBLISH Keys.Events).
func (r *Rooms) hint(ctx context.Context, id string, res TickResult) error {
	msg := res.State + " " + strconv.FormatInt(res.Cursor, 10)
	return r.client.Do(ctx, r.client.B().Spublish().Channel(r.Keys(id).Events()).Message(msg).Build()).Error()
}
