package httpapi

import (
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

// EntryTokenHeader carries the entry token of an admitted user on a claim.
const EntryTokenHeader = "X-Entry-Token"

// Bounds of poll_after_ms: a waiting client polls again after about half
// its estimated wait, never sooner than minPoll and never later than
// maxPoll, which stays well inside the abandonment time (a poll is a
// check-in).
const (
	minPoll = time.Second
	maxPoll = 30 * time.Second
)

// seconds is d in seconds, rounded to 0.1 s.
func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*10) / 10 }

// toQueueOut maps a standing to its JSON.
func toQueueOut(st waitroom.Standing) api.QueueStanding {
	out := api.QueueStanding{Status: string(st.Status), Message: st.Message}
	switch st.Status {
	case waitroom.StatusWaiting:
		pos, wait := st.Position, seconds(st.Wait.Wait)
		last := st.StockExpectedToLast
		poll := min(max(st.Wait.Wait/2, minPoll), maxPoll).Milliseconds()
		out.Position, out.EstimatedWaitSeconds, out.StockExpectedToLast, out.PollAfterMS = &pos, &wait, &last, &poll
		out.EstimatedWaitRangeSeconds = []float64{seconds(st.Wait.Low), seconds(st.Wait.High)}
	case waitroom.StatusPrequeue:
		// No place yet: ask again about half-way to the shuffle, which
		// checks the user in like any status request.
		poll := min(max(time.Until(st.ShuffleAt)/2, minPoll), maxPoll).Milliseconds()
		out.ShuffleAt, out.PollAfterMS = optTime(st.ShuffleAt), &poll
	case waitroom.StatusAdmitted:
		out.EntryToken = st.Token
		out.ExpiresAt = optTime(st.Pass.ExpiresAt)
	}
	switch st.Status {
	case waitroom.StatusWaiting, waitroom.StatusPrequeue, waitroom.StatusAdmitted:
		paused := st.Paused
		out.Paused = &paused
	}
	return out
}

// waitingRooms answers the waiting-room endpoints: a join, a user's
// standing.
type waitingRooms struct {
	*failureLogs
	manager *promotion.Manager
	watcher *waitroom.Watcher // the standings of the users it serves, if any
	m       *Metrics
}

// queue answers the waiting-room endpoints: POST …/queue joins, GET
// …/queue/{user_id} answers a user's standing and checks the user in.
func (s *waitingRooms) queue(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	var (
		user string
		in   api.JoinRequest
	)
	join := r.PathValue("user_id") == ""
	if join {
		if pr := decodeJSON(w, r, MaxBodyBytes, &in); pr != nil {
			pr.write(w, r)
			return
		}
		u, err := edge.CheckUser(r.Context(), in.UserID)
		if err != nil {
			problem(CodeInvalidRequest, "user_id is not the user of the token").withField("user_id").write(w, r)
			return
		}
		if !promotion.ValidID(u) {
			problem(CodeInvalidRequest, "user_id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit").withField("user_id").write(w, r)
			return
		}
		user = u
	} else if user, ok = pathID(w, r, "user_id"); !ok {
		return
	}
	var st waitroom.Standing
	if join {
		st, ok = s.joinRoom(w, r, id, user, waitroom.Proof{Challenge: in.Challenge, Nonce: in.Nonce})
	} else {
		st, ok = s.lookup(w, r, id, user, false)
	}
	if !ok {
		return
	}
	code := http.StatusOK
	if join {
		s.m.Joins.Inc()
		if st.Status == waitroom.StatusWaiting || st.Status == waitroom.StatusPrequeue {
			code = http.StatusAccepted
		}
	} else {
		s.m.PositionLookups.WithLabelValues("json").Inc()
	}
	writeJSON(w, code, toQueueOut(st))
}

// lookup joins user to promotion id's room (join) or reads the user's
// standing, checking the user in: through the Watcher when the server has
// one, which answers a waiting user from the room's latest read and writes
// the check-in with the next one. ok false means the request was answered
// with a problem.
func (s *waitingRooms) lookup(w http.ResponseWriter, r *http.Request, id, user string, join bool) (st waitroom.Standing, ok bool) {
	rooms := s.manager.Rooms()
	if rooms == nil {
		s.noRoom(w, r, id)
		return st, false
	}
	call := func() (waitroom.Standing, error) {
		switch {
		case join:
			return rooms.Join(r.Context(), id, user)
		case s.watcher != nil:
			// A waiting user is answered from the room's latest read.
			return s.watcher.Status(r.Context(), id, user)
		default:
			return rooms.Status(r.Context(), id, user, true)
		}
	}
	return s.inRoom(w, r, id, call)
}

// inRoom runs call, a join or a standing of promotion id's waiting room,
// and answers a failure. When Redis holds no room it reads the promotion
// (which opens it on this instance if need be): a promotion without a room
// gets 404, one whose room was only not opened here yet gets call again.
// It returns call's standing and whether it succeeded.
func (s *waitingRooms) inRoom(w http.ResponseWriter, r *http.Request, id string, call func() (waitroom.Standing, error)) (waitroom.Standing, bool) {
	st, err := call()
	if errors.Is(err, promotion.ErrRoomNotFound) {
		// No room in Redis: the promotion may be unknown, have no room, or
		// not be opened on this instance yet (reading it opens it).
		v, gerr := s.manager.Get(r.Context(), id)
		if gerr != nil {
			s.fail(w, r, gerr)
			return st, false
		}
		if !v.WaitingRoom.Enabled {
			problem(CodeNotFound, "this promotion has no waiting room; claim directly").write(w, r)
			return st, false
		}
		st, err = call()
	}
	if err != nil {
		s.fail(w, r, err)
		return st, false
	}
	return st, true
}

// noRoom answers a waiting-room request on a server that runs no waiting
// room: the promotion's own 404, or the 404 of a queue that does not exist.
func (s *waitingRooms) noRoom(w http.ResponseWriter, r *http.Request, id string) {
	if _, err := s.manager.Get(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	problem(CodeNotFound, "this promotion has no waiting room; claim directly").write(w, r)
}
