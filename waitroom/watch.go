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

	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/keyspace"
)

// DefaultWatchRefresh is how often a Watcher re-reads a room it serves when
// no hint came.
const DefaultWatchRefresh = 2 * time.Second

// DefaultWatchUsers is how many users a Watcher keeps the places of per
// room for status lookups, besides the users it has watches of.
const DefaultWatchUsers = 100_000

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
func (k Keys) Events() string { return k.space.Key(keyspace.RoomEvents) }

// Final tells whether a standing with status s no longer changes by
// itself: every status but waiting and prequeue. An admitted user claims with the token;
// the others must join again, or the promotion is over.
func (s Status) Final() bool { return s != StatusWaiting && s != StatusPrequeue }

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Refresh is how often a room the Watcher serves is re-read when no
	// hint came; a room whose AbandonAfter is shorter than three times
	// Refresh is re-read every third of it. Defaults to
	// DefaultWatchRefresh (2s).
	Refresh time.Duration
	// Users bounds the users of one room whose places the Watcher keeps
	// for status lookups; past it, lookups of further users are answered
	// by the status script. Users with a watch open are kept whatever the
	// bound. Defaults to DefaultWatchUsers (100,000; about 200 bytes each).
	Users int
	// Logger receives the watcher's logs (never tokens). Defaults to the
	// Rooms' Logger.
	Logger *slog.Logger
}

// Watcher serves the standings of waiting users from one read of each room
// per tick: the room's cursor, counts and state (a snapshot), shared by
// every watch and status lookup of the instance, and each user's place,
// read once and kept (a place never changes while its user waits, and
// admission moves the line for everyone at once). One goroutine owns the
// rooms, their snapshots, places and watches; it does no I/O itself, so it
// answers at once:
//
//   - a room is read when it is first served, on every hint (the
//     scheduler of any instance publishes one on the room's sharded
//     channel, Keys.Events, after a tick that changed something: an
//     admission, sold out, a pause), and every Refresh whatever happens;
//   - each read hands every watch whose answer changed its new standing
//     (Updates), and answers every Status lookup until the next read;
//   - the users looked up or watched since their last check-in are checked
//     in with the next read, in batches (one script call per 100 users),
//     each user at most every tenth of the room's abandonment time;
//   - a user the snapshot cannot answer (let in, and so in need of the
//     pass's token; used, expired, abandoned, in the prequeue, or not
//     known yet) is answered by the status script, as Rooms.Status does;
//   - the ticks of this instance's scheduler hand it their admissions
//     (Admit, as Config.OnAdmit), which it passes to the watches of the
//     admitted users before Admit returns.
//
// A Watch holds the latest standing only: a watcher that reads slowly skips
// to the newest and never holds up the Watcher or a tick.
type Watcher struct {
	rooms *Rooms
	cfg   WatcherConfig

	// Inputs of the loop goroutine, which owns every room, place and watch.
	subscribe   chan *Watch
	unsubscribe chan *Watch
	admit       chan admitMsg
	asks        chan *ask
	hints       chan string
	results     chan roundDone

	// Counters written by the loop and the lookups, read by Stats.
	watches, fromSnapshot, fromScript atomic.Int64

	// life runs the loop. Started closed and Done open: the loop runs.
	life startstop.Base
}

// NewWatcher returns a Watcher of rooms' standings. Start it before use.
func NewWatcher(rooms *Rooms, cfg WatcherConfig) *Watcher {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultWatchRefresh
	}
	if cfg.Users <= 0 {
		cfg.Users = DefaultWatchUsers
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
		asks:        make(chan *ask),
		hints:       make(chan string),
		results:     make(chan roundDone),
	}
}

// Start starts the watcher's loop; ctx's values reach the reads, not its
// cancellation (Stop ends the watcher). A second Start fails with
// ErrStarted, and a Start after Stop with ErrStopped.
func (w *Watcher) Start(ctx context.Context) error {
	return w.life.StartContext(ctx, w.run)
}

// Stop stops the watcher: its subscriptions end, the re-reads in flight are
// cancelled and waited for. Open watches get no more updates (their
// channels stay open; close them; their Done closes), and lookups go to
// the status script. It returns ctx.Err() if ctx ends first. It is safe to
// call twice, and before Start.
func (w *Watcher) Stop(ctx context.Context) error {
	return w.life.Stop(ctx)
}

// Watches is the number of open watches.
func (w *Watcher) Watches() int64 { return w.watches.Load() }

// WatcherStats counts the Watcher's answers to status lookups.
type WatcherStats struct {
	// FromSnapshot is the lookups answered from a room's snapshot and the
	// user's kept place, with no Redis command.
	FromSnapshot int64
	// FromScript is the lookups answered by the status script.
	FromScript int64
}

// Stats returns the Watcher's counters.
func (w *Watcher) Stats() WatcherStats {
	return WatcherStats{FromSnapshot: w.fromSnapshot.Load(), FromScript: w.fromScript.Load()}
}

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
func (s *Watch) Done() <-chan struct{} { return s.w.life.Done() }

// Close stops the watch. It is safe to call twice, and after the Watcher
// stopped.
func (s *Watch) Close() {
	s.once.Do(func() {
		select {
		case s.w.unsubscribe <- s:
		case <-s.w.life.Done():
		}
	})
}

// Watch starts watching userID's standing in promotion id's room. It reads
// nothing: read the standing once after Watch returns (Status), so that no
// change between the read and the watch is missed. An open watch checks
// its user in. ErrWatcherClosed if the watcher is not running.
func (w *Watcher) Watch(id, userID string) (*Watch, error) {
	s := &Watch{promotion: id, user: userID, w: w, c: make(chan Standing, 1)}
	if !w.started() {
		return nil, ErrWatcherClosed
	}
	select {
	case w.subscribe <- s:
		return s, nil
	case <-w.life.Done():
		return nil, ErrWatcherClosed
	}
}

// ask is a status lookup handed to the loop, which answers in st and ok
// and closes done; or (learn) the standing a lookup read by the status
// script, for the loop to keep the user's place (done nil).
type ask struct {
	id, user string
	learn    bool
	st       Standing
	ok       bool
	done     chan struct{}
}

// Status answers userID's standing in promotion id's room and checks the
// user in, as Rooms.Status(ctx, id, userID, true) does. A user who waits
// at a place the Watcher knows, in a room it read within the last two
// periods, is answered from that read with no Redis command, and checked in
// with the room's next read; any other user (the first lookup, an admitted
// one who needs the pass's token, …) by the status script, whose answer
// the Watcher keeps the place of. A stopped Watcher answers every lookup
// by the script.
func (w *Watcher) Status(ctx context.Context, id, userID string) (Standing, error) {
	a := &ask{id: id, user: userID, done: make(chan struct{})}
	if w.toLoop(ctx, a) {
		<-a.done // the loop answers at once
		if a.ok {
			w.fromSnapshot.Add(1)
			return a.st, nil
		}
	}
	w.fromScript.Add(1)
	st, err := w.rooms.Status(ctx, id, userID, true)
	if err == nil {
		w.toLoop(ctx, &ask{id: id, user: userID, learn: true, st: st})
	}
	return st, err
}

// toLoop hands a to the loop; false if the loop does not run or ctx ends
// first.
func (w *Watcher) toLoop(ctx context.Context, a *ask) bool {
	if !w.started() {
		return false
	}
	select {
	case w.asks <- a:
		return true
	case <-w.life.Done():
	case <-ctx.Done():
	}
	return false
}

// started tells whether Start ran the loop (which may have returned since:
// wait on w.life.Done beside any send to it). Before, nothing would ever
// receive.
func (w *Watcher) started() bool {
	select {
	case <-w.life.Started():
		return true
	default:
		return false
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
	if w == nil || len(admitted) == 0 || !w.started() {
		return
	}
	m := admitMsg{id: id, admitted: admitted, done: make(chan struct{})}
	select {
	case w.admit <- m:
		<-m.done
	case <-w.life.Done():
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
