package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dibsio/dibs/client"
)

// maxSolves bounds the challenges one join solves: a challenge refused
// again (the difficulty raised meanwhile, or it expired) is solved anew
// this often, as client.JoinQueueSolving does.
const maxSolves = 3

// roomTrip is what one user's goroutine sends the room with.
type roomTrip struct {
	r       *runner
	ctx     context.Context
	sem     chan struct{} // the requests in flight
	solvers chan struct{} // the solves running, one core each
	events  chan<- roomEvent
}

// roomReply is the answer of one request to the room: a standing, or an
// outcome (a problem's code, transport_error, timed_out…) with its detail
// and, for challenge_required, the challenge.
type roomReply struct {
	st         standing
	outcome    string
	detail     string
	challenge  string
	difficulty int
	took       time.Duration
}

// challengeProblem is what a challenge_required problem carries.
type challengeProblem struct {
	Challenge  string `json:"challenge"`
	Difficulty int    `json:"difficulty"`
}

// send sends one request to the room, within the bound on requests in
// flight.
func (rt roomTrip) send(method, target string, body []byte) roomReply {
	select {
	case rt.sem <- struct{}{}:
	case <-rt.ctx.Done():
		return roomReply{outcome: "timed_out", detail: rt.ctx.Err().Error()}
	}
	began := time.Now()
	code, data, err := rt.r.do(rt.ctx, method, target, body, false)
	rep := roomReply{took: time.Since(began)}
	<-rt.sem
	kind := "lookup"
	if method == http.MethodPost {
		kind = "join"
	}
	switch {
	case err != nil && rt.ctx.Err() != nil:
		rep.outcome, rep.detail = "timed_out", rt.ctx.Err().Error()
	case err != nil:
		rep.outcome, rep.detail = OutcomeTransportError, err.Error()
	case code == http.StatusOK || code == http.StatusAccepted:
		if json.Unmarshal(data, &rep.st) != nil || rep.st.Status == "" {
			rep.outcome, rep.detail = OutcomeBadResponse, "standing without status: "+snippet(data)
		}
	default:
		p := apiError(kind, code, data)
		rep.outcome, rep.detail = p.Code, p.Error()
		if p.Code == "" {
			rep.outcome = fmt.Sprintf("http_%d", code)
		}
		if p.Code == client.CodeChallengeRequired {
			var cp challengeProblem
			_ = json.Unmarshal(data, &cp)
			rep.challenge, rep.difficulty = cp.Challenge, cp.Difficulty
		}
	}
	return rep
}

// join joins the room as user: a join answered challenge_required is
// solved and sent again with the solution, up to maxSolves times. Each
// answer is a "join" event, those followed by another join marked retry.
func (rt roomTrip) join(queue, user string) roomReply {
	body, _ := json.Marshal(map[string]string{"user_id": user})
	for tries := 0; ; tries++ {
		rep := rt.send(http.MethodPost, queue, body)
		retry := rep.outcome == client.CodeChallengeRequired && rep.challenge != "" && tries < maxSolves
		rt.events <- roomEvent{kind: "join", latency: rep.took, ok: rep.outcome == "", retry: retry}
		if !retry {
			return rep
		}
		nonce, err := rt.solve(rep.challenge, rep.difficulty)
		if err != nil {
			return roomReply{outcome: "timed_out", detail: "solving a challenge: " + err.Error()}
		}
		body, _ = json.Marshal(map[string]string{"user_id": user, "challenge": rep.challenge, "nonce": nonce})
	}
}

// solve solves a challenge on one core, within the bound on solves
// running, and reports its time and hashes (a "solve" event).
func (rt roomTrip) solve(challenge string, difficulty int) (string, error) {
	select {
	case rt.solvers <- struct{}{}:
	case <-rt.ctx.Done():
		return "", rt.ctx.Err()
	}
	began := time.Now()
	nonce, err := client.SolveChallenge(rt.ctx, challenge, difficulty)
	took := time.Since(began)
	<-rt.solvers
	if err != nil {
		return "", err
	}
	n, _ := strconv.ParseInt(nonce, 10, 64) // decimal counters from 0
	rt.events <- roomEvent{kind: "solve", latency: took, hashes: n + 1}
	return nonce, nil
}
