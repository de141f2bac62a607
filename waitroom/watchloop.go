package waitroom

import (
	"context"
	"sync"
	"time"
)

// watchRoom is what the Watcher's loop keeps of one room it serves.
type watchRoom struct {
	id      string
	cancel  context.CancelFunc // ends the room's hint subscription
	users   map[string]*member
	snap    *snapshot     // the latest read; nil before the first
	snapAt  time.Time     // when the read of snap started (local clock)
	shown   view          // the view of the snapshot last handed to the watches
	reading bool          // a round is in flight
	dirty   bool          // a hint came during the round
	every   time.Duration // fallback period of the reads
	due     time.Time     // the next fallback read
}

// member is what the loop keeps of one user of a room: the place while the
// user is known to wait, the check-ins, and the user's open watches.
type member struct {
	place     int64     // the user's place; 0 while not known to wait
	since     int64     // Redis ms of the standing the place was learnt with
	checkedIn int64     // Redis ms of the latest check-in known written
	checkedAt time.Time // when that check-in's read started (local clock)
	used      time.Time // the latest lookup (open watches count at each read)
	seen      bool      // looked up or watched since checkedAt
	fresh     bool      // learnt since the watches were last handed a snapshot's answer
	watches   []*Watch
}

// live tells whether the member has a watch that still takes standings.
func (m *member) live() bool {
	for _, s := range m.watches {
		if !s.final {
			return true
		}
	}
	return false
}

// roundDone is a round's outcome, sent by its goroutine to the loop.
type roundDone struct {
	room    *watchRoom
	rd      round
	started time.Time
	res     roundResult
}

// watchLoop is the state of the Watcher's loop goroutine.
type watchLoop struct {
	w     *Watcher
	ctx   context.Context
	wg    sync.WaitGroup
	rooms map[string]*watchRoom
}

// run is the loop: it owns the rooms, their places and watches until ctx
// ends, then waits for the goroutines it started.
func (w *Watcher) run(ctx context.Context) {
	l := &watchLoop{w: w, ctx: ctx, rooms: map[string]*watchRoom{}}
	timer := time.NewTimer(w.cfg.Refresh)
	defer func() {
		timer.Stop()
		for _, room := range l.rooms {
			room.cancel()
		}
		l.wg.Wait()
		w.watches.Store(0)
	}()
	for {
		now := time.Now()
		next := now.Add(w.cfg.Refresh)
		for _, room := range l.rooms {
			if !room.reading && room.due.Before(next) {
				next = room.due
			}
		}
		timer.Reset(max(next.Sub(now), 0))
		select {
		case <-ctx.Done():
			return
		case s := <-w.subscribe:
			l.subscribe(s)
		case s := <-w.unsubscribe:
			l.unsubscribe(s)
		case a := <-w.asks:
			l.ask(a)
		case m := <-w.admit:
			l.admitted(m)
		case id := <-w.hints:
			switch room := l.rooms[id]; {
			case room == nil:
			case room.reading:
				room.dirty = true
			default:
				l.read(room, true)
			}
		case d := <-w.results:
			l.finish(d)
		case <-timer.C:
			now := time.Now()
			for _, room := range l.rooms {
				if !room.reading && !room.due.After(now) {
					l.read(room, true)
				}
			}
		}
	}
}

// room returns room id, made (subscribed, its first read due at once) if
// missing.
func (l *watchLoop) room(id string) *watchRoom {
	room := l.rooms[id]
	if room == nil {
		rctx, cancel := context.WithCancel(l.ctx)
		room = &watchRoom{id: id, users: map[string]*member{}, cancel: cancel, every: l.w.cfg.Refresh, due: time.Now()}
		l.rooms[id] = room
		l.wg.Go(func() { l.w.listen(rctx, id) })
	}
	return room
}

func (l *watchLoop) subscribe(s *Watch) {
	room := l.room(s.promotion)
	m := room.users[s.user]
	if m == nil {
		m = &member{}
		room.users[s.user] = m
	}
	m.watches = append(m.watches, s)
	m.used, m.seen = time.Now(), true
	l.w.watches.Add(1)
}

func (l *watchLoop) unsubscribe(s *Watch) {
	m := l.rooms[s.promotion].member(s.user)
	if m == nil {
		return
	}
	for i, o := range m.watches {
		if o == s {
			m.watches = append(m.watches[:i], m.watches[i+1:]...)
			m.used, m.seen = time.Now(), true // the stream's end is a check-in too
			l.w.watches.Add(-1)
			return
		}
	}
}

// member returns the member user of room, nil if none (or no room).
func (room *watchRoom) member(user string) *member {
	if room == nil {
		return nil
	}
	return room.users[user]
}

// ask answers a lookup from the room's snapshot, or learns what a lookup
// read by the status script.
func (l *watchLoop) ask(a *ask) {
	now := time.Now()
	if a.learn {
		l.learn(a.id, a.user, a.st, now)
		return
	}
	defer close(a.done)
	room := l.rooms[a.id]
	m := room.member(a.user)
	if m == nil {
		return
	}
	m.used, m.seen = now, true
	if m.place > 0 && room.snap != nil && now.Sub(room.snapAt) <= 2*room.every &&
		m.checkedIn+room.snap.abandon.Milliseconds() > room.snap.now {
		a.st, a.ok = room.snap.answer(m.place)
	}
}

// learn keeps the place of a user the status script found waiting, and
// forgets it for any other standing. A room is served from the first user
// learnt to wait in it; at most Users users a room are kept besides those
// with watches.
func (l *watchLoop) learn(id, user string, st Standing, now time.Time) {
	m := l.rooms[id].member(user)
	if st.Status != StatusWaiting || st.Place <= 0 {
		if m != nil {
			m.place = 0
		}
		return
	}
	if m == nil {
		room := l.room(id)
		if len(room.users) >= l.w.cfg.Users {
			return
		}
		m = &member{}
		room.users[user] = m
	}
	l.know(m, st, now)
	m.used = now
}

// know records that m waits at st's place, checked in at st.Now (the
// status script checks in a waiting user).
func (l *watchLoop) know(m *member, st Standing, at time.Time) {
	ms := st.Now.UnixMilli()
	m.place, m.since, m.fresh = st.Place, ms, true
	if ms > m.checkedIn {
		m.checkedIn, m.checkedAt, m.seen = ms, at, false
	}
}

// admitted hands a tick's admissions to the watches of their users.
func (l *watchLoop) admitted(msg admitMsg) {
	if room := l.rooms[msg.id]; room != nil {
		for _, a := range msg.admitted {
			if m := room.users[a.Pass.User]; m != nil {
				m.place = 0
				deliver(m.watches, Standing{Status: StatusAdmitted, Pass: a.Pass, Token: a.Token})
			}
		}
	}
	close(msg.done)
}

// checkInEvery is how often a user seen all along is checked in: a tenth of
// the room's abandonment time (the fallback period while it is unknown).
func (room *watchRoom) checkInEvery() time.Duration {
	if room.snap != nil && room.snap.abandon > 0 {
		return room.snap.abandon / 10
	}
	return room.every
}

// read starts a round of room: with the snapshot (full) the check-ins due,
// and in any case the standings of the watched users whose places are not
// known.
func (l *watchLoop) read(room *watchRoom, full bool) {
	now := time.Now()
	rd := round{snapshot: full}
	every := room.checkInEvery()
	for u, m := range room.users {
		live := m.live()
		if live {
			m.used, m.seen = now, true
		}
		switch {
		case m.place == 0:
			if live {
				rd.statuses = append(rd.statuses, u)
			}
		case full && m.seen && now.Sub(m.checkedAt) >= every:
			rd.checkIns = append(rd.checkIns, u)
		}
	}
	room.reading, room.dirty = true, false
	l.wg.Go(func() {
		d := roundDone{room: room, rd: rd, started: now, res: l.w.rooms.readRound(l.ctx, room.id, rd)}
		select {
		case l.w.results <- d:
		case <-l.ctx.Done():
		}
	})
}

// finish takes a round's outcome: the snapshot, the check-ins and the
// standings read, then hands every watch whose answer changed its standing
// and forgets the users who no longer need keeping.
func (l *watchLoop) finish(d roundDone) {
	room, res := d.room, d.res
	if l.rooms[room.id] != room {
		return // dropped meanwhile
	}
	room.reading = false
	if res.err != nil && l.ctx.Err() == nil {
		l.w.cfg.Logger.Warn("waiting room watch", "promotion", room.id, "err", res.err)
	}
	if d.rd.snapshot {
		if res.snap != nil {
			room.snap, room.snapAt = res.snap, d.started
			room.every = refreshEvery(l.w.cfg.Refresh, res.snap.abandon)
		}
		room.due = d.started.Add(room.every)
	}
	for u, p := range res.checked.places {
		m := room.users[u]
		switch {
		case m == nil:
		case p == 0:
			m.place = 0
		default:
			if p != m.place {
				m.place, m.since, m.fresh = p, res.checked.now, true
			}
			if res.checked.now > m.checkedIn {
				// A user whose check-in had lapsed in the snapshot's eyes
				// got no answers from it: hand the next one over.
				m.fresh = m.fresh || (room.snap != nil && m.checkedIn+room.snap.abandon.Milliseconds() <= room.snap.now)
				m.checkedIn, m.checkedAt, m.seen = res.checked.now, d.started, false
			}
		}
	}
	for u, st := range res.standings {
		if m := room.users[u]; m != nil {
			if st.Status == StatusWaiting && st.Place > 0 {
				l.know(m, st, d.started)
			} else {
				m.place = 0
			}
			deliver(m.watches, st)
		}
	}
	passed := 0
	if res.snap != nil {
		passed = room.fanOut()
	}
	if room.sweep(time.Now()) {
		room.cancel()
		delete(l.rooms, room.id)
		return
	}
	switch {
	case room.dirty:
		l.read(room, true)
	case passed > 0:
		l.read(room, false) // the watched users admission reached need the script
	}
}

// fanOut hands each watched user whose answer changed the snapshot's
// answer, and forgets the places admission has reached. It returns how
// many watched users it forgot the place of.
func (room *watchRoom) fanOut() (passed int) {
	snap := room.snap
	v := snap.view()
	changed := v != room.shown
	room.shown = v
	for _, m := range room.users {
		if m.place == 0 {
			continue
		}
		live := m.live()
		if m.place <= snap.cursor {
			m.place = 0
			if live {
				passed++
			}
			continue
		}
		if !live || !(changed || m.fresh) || snap.now < m.since ||
			m.checkedIn+snap.abandon.Milliseconds() <= snap.now {
			continue
		}
		if st, ok := snap.answer(m.place); ok {
			deliver(m.watches, st)
			m.fresh = false
		}
	}
	return passed
}

// sweep forgets the users without watches who are no longer known to wait
// or were not looked up for half the room's abandonment time, and tells
// whether the room has no user left.
func (room *watchRoom) sweep(now time.Time) (empty bool) {
	keep := room.every
	if room.snap != nil && room.snap.abandon > 0 {
		keep = room.snap.abandon / 2
	}
	for u, m := range room.users {
		if len(m.watches) == 0 && (m.place == 0 || now.Sub(m.used) >= keep) {
			delete(room.users, u)
		}
	}
	return len(room.users) == 0
}

// refreshEvery is a room's fallback period: refresh, or a third of the
// room's abandonment time if that is shorter. At least 1ms.
func refreshEvery(refresh, abandon time.Duration) time.Duration {
	if abandon > 0 && abandon/3 < refresh {
		refresh = abandon / 3
	}
	return max(refresh, time.Millisecond)
}

// deliver hands st to every watch of a user, replacing a standing not yet
// read. Watches that got a final standing get nothing more. Called by the
// loop only, the one sender, so the replacement cannot block.
func deliver(watches []*Watch, st Standing) {
	for _, s := range watches {
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
