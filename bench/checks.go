package bench

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Status is the verdict of one [Check].
type Status string

// Check verdicts.
const (
	// Pass means the invariant held.
	Pass Status = "pass"
	// Fail means the invariant was broken; [Report.OK] is then false.
	Fail Status = "fail"
	// Skip means the run did not give what the check needs (for example,
	// some claims got no definite answer, so the exact count is unknown).
	Skip Status = "skip"
)

// Names of the checks in a [Report], in the order they appear.
const (
	CheckAnswered     = "answered"
	CheckNoOversell   = "accepted_le_stock"
	CheckExactCount   = "accepted_exact"
	CheckRanks        = "ranks"
	CheckPerUserLimit = "per_user_limit"
	CheckServerCounts = "server_counts"
	CheckAllIssued    = "all_issued"
	CheckSpot         = "spot_check"
)

// Outcomes a claim can have besides the problem codes of the API.
const (
	// OutcomeAccepted is a 202 answer.
	OutcomeAccepted = "accepted"
	// OutcomeTransportError is a request that got no HTTP answer (refused,
	// reset, timed out): whether the server accepted it is unknown.
	OutcomeTransportError = "transport_error"
	// OutcomeBadResponse is an answer that is not what the API promises
	// (a 202 without a rank, an error without a problem body, ...).
	OutcomeBadResponse = "bad_response"
)

// definite lists the outcomes that are a definite, expected answer to a
// claim in a load test: anything else means the run did not go as planned.
var definite = map[string]bool{OutcomeAccepted: true, "sold_out": true, "already_claimed": true}

// Check is one invariant check with its verdict.
type Check struct {
	// Name is one of the Check… constants.
	Name string `json:"name"`
	// Title says in words what is checked.
	Title string `json:"title"`
	// Status is the verdict.
	Status Status `json:"status"`
	// Detail gives the numbers behind the verdict.
	Detail string `json:"detail"`
}

func passIf(ok bool) Status {
	if ok {
		return Pass
	}
	return Fail
}

// checkAnswered checks that every claim got a definite answer.
func checkAnswered(outcomes map[string]int, firstErrors map[string]string) Check {
	c := Check{Name: CheckAnswered, Title: "every claim got accepted, sold_out or already_claimed"}
	total, bad := 0, 0
	var parts []string
	for _, code := range sortedKeys(outcomes) {
		n := outcomes[code]
		total += n
		if definite[code] {
			continue
		}
		bad += n
		p := fmt.Sprintf("%d %s", n, code)
		if e := firstErrors[code]; e != "" {
			p += fmt.Sprintf(" (first: %s)", e)
		}
		parts = append(parts, p)
	}
	c.Status = passIf(bad == 0)
	if bad == 0 {
		c.Detail = fmt.Sprintf("%d of %d", total, total)
	} else {
		c.Detail = fmt.Sprintf("%d of %d did not: %s", bad, total, strings.Join(parts, ", "))
	}
	return c
}

// checkNoOversell checks accepted ≤ stock, on both the client's count and
// the server's.
func checkNoOversell(accepted, serverAccepted int64, serverKnown bool, stock int) Check {
	c := Check{Name: CheckNoOversell, Title: "accepted <= stock"}
	ok := accepted <= int64(stock)
	c.Detail = fmt.Sprintf("%d accepted, stock %d", accepted, stock)
	if serverKnown {
		ok = ok && serverAccepted <= int64(stock)
		c.Detail += fmt.Sprintf(" (server: %d accepted)", serverAccepted)
	}
	c.Status = passIf(ok)
	return c
}

// expectedAccepted is how many claims must be accepted when every claim got
// a definite answer: every user can hold at most min(limit, repeat) units,
// and there are only stock units.
func expectedAccepted(stock, users, limit, repeat int) int64 {
	return min(int64(stock), int64(users)*int64(min(limit, repeat)))
}

func checkExactCount(accepted, want int64, answered bool) Check {
	c := Check{Name: CheckExactCount, Title: "accepted == min(stock, users x min(limit, repeat))"}
	if !answered {
		c.Status = Skip
		c.Detail = fmt.Sprintf("%d accepted; not every claim got a definite answer, so the exact count is unknown", accepted)
		return c
	}
	c.Status = passIf(accepted == want)
	c.Detail = fmt.Sprintf("%d accepted, want %d", accepted, want)
	return c
}

// CheckRankSet reports whether ranks holds exactly the numbers 1..len(ranks),
// each once, in any order, and if not, says what is wrong: out-of-range
// ranks, repeats and gaps, each with a few examples.
func CheckRankSet(ranks []int64) (ok bool, detail string) {
	n := int64(len(ranks))
	sorted := slices.Clone(ranks)
	slices.Sort(sorted)
	var outOfRange, repeated []int64
	seen := make([]bool, n+1)
	for _, r := range sorted {
		switch {
		case r < 1 || r > n:
			outOfRange = append(outOfRange, r)
		case seen[r]:
			repeated = append(repeated, r)
		default:
			seen[r] = true
		}
	}
	var missing []int64
	for r := int64(1); r <= n; r++ {
		if !seen[r] {
			missing = append(missing, r)
		}
	}
	if len(outOfRange) == 0 && len(repeated) == 0 && len(missing) == 0 {
		if n == 0 {
			return true, "no ranks handed out"
		}
		return true, fmt.Sprintf("%d distinct ranks 1..%d, no gaps or repeats", n, n)
	}
	var parts []string
	if len(repeated) > 0 {
		parts = append(parts, fmt.Sprintf("%d repeated (%s)", len(repeated), examples(slices.Compact(repeated))))
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d missing (%s)", len(missing), examples(missing)))
	}
	if len(outOfRange) > 0 {
		parts = append(parts, fmt.Sprintf("%d outside 1..%d (%s)", len(outOfRange), n, examples(outOfRange)))
	}
	return false, fmt.Sprintf("%d ranks: %s", n, strings.Join(parts, ", "))
}

func checkRanks(ranks []int64) Check {
	ok, detail := CheckRankSet(ranks)
	return Check{Name: CheckRanks, Title: "ranks are exactly 1..accepted", Status: passIf(ok), Detail: detail}
}

// checkPerUserLimit checks that no user was accepted more than limit times.
// perUser maps a user number to the number of its accepted claims.
func checkPerUserLimit(perUser map[int]int, limit int, userID func(int) string) Check {
	c := Check{Name: CheckPerUserLimit, Title: fmt.Sprintf("no user accepted more than per_user_limit (%d)", limit)}
	var over []int
	most := 0
	for u, n := range perUser {
		most = max(most, n)
		if n > limit {
			over = append(over, u)
		}
	}
	if len(over) == 0 {
		c.Status = Pass
		c.Detail = fmt.Sprintf("%d users accepted, at most %d each", len(perUser), most)
		return c
	}
	sort.Ints(over)
	var ex []string
	for _, u := range over[:min(3, len(over))] {
		ex = append(ex, fmt.Sprintf("%s: %d", userID(u), perUser[u]))
	}
	c.Status = Fail
	c.Detail = fmt.Sprintf("%d users over the limit (%s)", len(over), strings.Join(ex, ", "))
	return c
}

// checkServerCounts compares the server's accepted count with what clients
// saw. When some claims got no definite answer the server may have accepted
// them unseen, so it may only be higher.
func checkServerCounts(clientAccepted int64, server Counts, serverKnown, answered bool) Check {
	c := Check{Name: CheckServerCounts, Title: "server's accepted count matches the 202 answers"}
	if !serverKnown {
		c.Status = Fail
		c.Detail = "could not read the promotion's counts"
		return c
	}
	if answered {
		c.Status = passIf(server.Accepted == clientAccepted)
		c.Detail = fmt.Sprintf("server %d, clients %d", server.Accepted, clientAccepted)
		return c
	}
	c.Status = passIf(server.Accepted >= clientAccepted)
	c.Detail = fmt.Sprintf("server %d, clients at least %d (some answers unknown)", server.Accepted, clientAccepted)
	return c
}

// checkAllIssued checks the confirmation: every accepted claim issued,
// nothing pending or failed, within the timeout.
func checkAllIssued(server Counts, serverKnown, timedOut bool, timeout string) Check {
	c := Check{Name: CheckAllIssued, Title: "issued == accepted (server counts)"}
	if !serverKnown {
		c.Status = Fail
		c.Detail = "could not read the promotion's counts"
		return c
	}
	c.Status = passIf(!timedOut && server.Issued == server.Accepted && server.Pending == 0 && server.Failed == 0)
	c.Detail = fmt.Sprintf("%d issued of %d accepted, %d pending, %d failed", server.Issued, server.Accepted, server.Pending, server.Failed)
	if timedOut {
		c.Detail += ", gave up after " + timeout
	}
	return c
}

// spotResult is the read-back of one user's claim status.
type spotResult struct {
	user     string
	wantOK   bool   // the user's status was what the clients' answers imply
	problem  string // what was wrong, when not ok
	accepted bool   // the user had accepted claims
}

func checkSpot(results []spotResult, disabled bool) Check {
	c := Check{Name: CheckSpot, Title: "per-user claim status matches (issued / none)"}
	if disabled || len(results) == 0 {
		c.Status = Skip
		c.Detail = "no users checked"
		return c
	}
	var acc, none int
	var bad []string
	for _, r := range results {
		if r.accepted {
			acc++
		} else {
			none++
		}
		if !r.wantOK {
			bad = append(bad, r.user+": "+r.problem)
		}
	}
	c.Status = passIf(len(bad) == 0)
	c.Detail = fmt.Sprintf("%d users checked (%d accepted show issued, %d rejected show none)", len(results), acc, none)
	if len(bad) > 0 {
		c.Detail = fmt.Sprintf("%d of %d users wrong: %s", len(bad), len(results), strings.Join(bad[:min(3, len(bad))], "; "))
	}
	return c
}

func examples(xs []int64) string {
	const show = 5
	var s []string
	for _, x := range xs[:min(show, len(xs))] {
		s = append(s, fmt.Sprint(x))
	}
	if len(xs) > show {
		s = append(s, "...")
	}
	return strings.Join(s, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
