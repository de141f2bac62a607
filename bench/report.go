package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Counts are a promotion's counts as the server reports them.
type Counts struct {
	Accepted  int64 `json:"accepted"`
	Pending   int64 `json:"pending"`
	Issued    int64 `json:"issued"`
	Failed    int64 `json:"failed"`
	Remaining int64 `json:"remaining"`
}

// Latency summarises the claim latencies seen by the clients, from sending
// the request to reading the whole answer.
type Latency struct {
	P50, P99, P999, Max, Mean time.Duration
}

// Report is the result of a [Run].
type Report struct {
	// Target is the server's base URL.
	Target string
	// PromotionID is the promotion the run created.
	PromotionID string
	// Stock, Users, PerUserLimit and Repeat are the run's parameters.
	Stock, Users, PerUserLimit, Repeat int
	// Waves is the number of waves, 0 for a steady run.
	Waves int
	// Concurrency is the most claims in flight at once: the workers of a
	// steady run, the largest wave of a wave run.
	Concurrency int
	// Claims is the number of claims sent.
	Claims int
	// Elapsed is the time from the first claim sent to the last answer.
	Elapsed time.Duration
	// Latency summarises the claims' latencies.
	Latency Latency
	// Accepted is the number of 202 answers.
	Accepted int64
	// Rejected counts the other answers by problem code (or by one of the
	// Outcome… constants when there was no problem to read).
	Rejected map[string]int
	// AllIssued reports whether the server confirmed every accepted claim
	// within the confirmation timeout.
	AllIssued bool
	// IssuedAfter is the time from the last answer until the server first
	// reported every accepted claim issued (or until the wait gave up).
	IssuedAfter time.Duration
	// Server holds the promotion's counts as last read from the server.
	Server Counts
	// Checks are the invariant checks, in a fixed order.
	Checks []Check
	// Room is what a waiting-room run saw of the room; nil otherwise.
	// Claims then counts the claims sent: users told sold_out in line
	// send none.
	Room *RoomReport
	// Winners are the first issued claims by rank, with their codes (see
	// ReadWinners); nil if they were not read.
	Winners []Winner
}

// OK reports whether no check failed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return false
		}
	}
	return true
}

// Failed returns the names of the checks that failed.
func (r Report) Failed() []string {
	var names []string
	for _, c := range r.Checks {
		if c.Status == Fail {
			names = append(names, c.Name)
		}
	}
	return names
}

// Throughput is the number of claims answered per second of Elapsed.
func (r Report) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Claims) / r.Elapsed.Seconds()
}

// reportJSON is the wire form of a Report: durations in milliseconds, the
// run's parameters grouped.
type reportJSON struct {
	OK          bool           `json:"ok"`
	Target      string         `json:"target"`
	PromotionID string         `json:"promotion_id"`
	Config      configJSON     `json:"config"`
	Claims      int            `json:"claims"`
	ElapsedMS   float64        `json:"elapsed_ms"`
	PerSecond   float64        `json:"claims_per_second"`
	LatencyMS   latencyJSON    `json:"latency_ms"`
	Accepted    int64          `json:"accepted"`
	Rejected    map[string]int `json:"rejected"`
	AllIssued   bool           `json:"all_issued"`
	IssuedAfter float64        `json:"all_issued_after_ms"`
	Server      Counts         `json:"server_counts"`
	Room        *roomJSON      `json:"waiting_room,omitempty"`
	Winners     []Winner       `json:"winners,omitempty"`
	Checks      []Check        `json:"checks"`
}

type roomJSON struct {
	AdmitPerSecond  int            `json:"admit_per_second"`
	Joined          int            `json:"joined"`
	Admitted        int            `json:"admitted"`
	SoldOut         int            `json:"sold_out_in_line"`
	InLine          map[string]int `json:"left_line_otherwise"`
	Lookups         int            `json:"lookups"`
	LookupsPerSec   float64        `json:"lookups_per_second"`
	JoinsPerSecond  float64        `json:"joins_per_second"`
	JoinLatencyMS   latencyJSON    `json:"join_latency_ms"`
	LookupLatencyMS latencyJSON    `json:"lookup_latency_ms"`
	ElapsedMS       float64        `json:"elapsed_ms"`
	MeasuredRate    float64        `json:"measured_admit_per_second"`
	RateError       float64        `json:"admit_rate_error"`
	RateWindowMS    float64        `json:"rate_window_ms"`
	RateSamples     int            `json:"rate_samples"`
	Server          RoomCounts     `json:"server_counts"`
	PoW             *powJSON       `json:"proof_of_work,omitempty"`
}

// powJSON is the proof of work of a waiting-room run with a difficulty.
type powJSON struct {
	Difficulty      int         `json:"difficulty"`
	Challenges      int         `json:"challenges"`
	Solves          int         `json:"solves"`
	SolveMS         latencyJSON `json:"solve_ms"`
	HashesPerSecond float64     `json:"solve_hashes_per_second"`
}

func latencyToJSON(l Latency) latencyJSON {
	return latencyJSON{P50: ms(l.P50), P99: ms(l.P99), P999: ms(l.P999), Max: ms(l.Max), Mean: ms(l.Mean)}
}

func (r *RoomReport) toJSON() *roomJSON {
	if r == nil {
		return nil
	}
	inLine := r.InLine
	if inLine == nil {
		inLine = map[string]int{}
	}
	return &roomJSON{
		AdmitPerSecond: r.AdmitPerSecond, Joined: r.Joined, Admitted: r.Admitted, SoldOut: r.SoldOut,
		InLine: inLine, Lookups: r.Lookups, LookupsPerSec: round(r.LookupsPerSecond(), 1), JoinsPerSecond: round(r.JoinsPerSecond(), 1),
		JoinLatencyMS: latencyToJSON(r.JoinLatency), LookupLatencyMS: latencyToJSON(r.LookupLatency),
		ElapsedMS: ms(r.Elapsed), MeasuredRate: round(r.MeasuredRate, 2), RateError: round(r.RateError(), 4),
		RateWindowMS: ms(r.RateWindow), RateSamples: r.RateSamples, Server: r.Server, PoW: r.powToJSON(),
	}
}

func (r *RoomReport) powToJSON() *powJSON {
	if r.PowDifficulty == 0 {
		return nil
	}
	return &powJSON{Difficulty: r.PowDifficulty, Challenges: r.Challenges, Solves: r.Solves,
		SolveMS: latencyToJSON(r.SolveTime), HashesPerSecond: round(r.HashesPerSecond(), 0)}
}

type configJSON struct {
	Stock        int    `json:"stock"`
	Users        int    `json:"users"`
	PerUserLimit int    `json:"per_user_limit"`
	Repeat       int    `json:"repeat"`
	Mode         string `json:"mode"`
	Waves        int    `json:"waves"`
	Concurrency  int    `json:"concurrency"`
}

type latencyJSON struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func (r Report) mode() string {
	if r.Room != nil {
		return "waiting_room"
	}
	if r.Waves > 0 {
		return "waves"
	}
	return "steady"
}

// MarshalJSON encodes the report as one JSON object with durations in
// milliseconds and an "ok" member that is [Report.OK].
func (r Report) MarshalJSON() ([]byte, error) {
	rejected := r.Rejected
	if rejected == nil {
		rejected = map[string]int{}
	}
	checks := r.Checks
	if checks == nil {
		checks = []Check{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the check titles say "<=" and are read by people too
	err := enc.Encode(reportJSON{
		OK:          r.OK(),
		Target:      r.Target,
		PromotionID: r.PromotionID,
		Config: configJSON{
			Stock: r.Stock, Users: r.Users, PerUserLimit: r.PerUserLimit, Repeat: r.Repeat,
			Mode: r.mode(), Waves: r.Waves, Concurrency: r.Concurrency,
		},
		Claims:      r.Claims,
		ElapsedMS:   ms(r.Elapsed),
		PerSecond:   round(r.Throughput(), 1),
		LatencyMS:   latencyToJSON(r.Latency),
		Accepted:    r.Accepted,
		Rejected:    rejected,
		AllIssued:   r.AllIssued,
		IssuedAfter: ms(r.IssuedAfter),
		Server:      r.Server,
		Room:        r.Room.toJSON(),
		Winners:     r.Winners,
		Checks:      checks,
	})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// WriteJSON writes the report as one JSON object followed by a newline.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep MarshalJSON's "<=" as it is
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteText writes the report for people: aligned key/value lines, then one
// line per check and a verdict.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	r.writeShape(&b)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	r.writeFigures(tw)
	if r.Room != nil {
		r.Room.writeFigures(tw, r.Accepted)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if r.Winners != nil {
		writeWinners(&b, r.Winners)
	}
	if err := r.writeChecks(&b); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// writeShape writes the heading: the promotion, and the load sent to it.
func (r Report) writeShape(b *strings.Builder) {
	fmt.Fprintf(b, "promotion %s at %s\n", r.PromotionID, r.Target)
	shape := fmt.Sprintf("%d workers", r.Concurrency)
	switch {
	case r.Room != nil:
		shape = fmt.Sprintf("through a waiting room admitting %d/s, up to %d requests in flight", r.Room.AdmitPerSecond, r.Concurrency)
	case r.Waves > 0:
		shape = fmt.Sprintf("%d waves of up to %d", r.Waves, r.Concurrency)
	}
	repeat := ""
	if r.Repeat > 1 {
		repeat = fmt.Sprintf(", %d claims each", r.Repeat)
	}
	fmt.Fprintf(b, "stock %s, %s users%s, per-user limit %d, %s\n\n",
		thousands(int64(r.Stock)), thousands(int64(r.Users)), repeat, r.PerUserLimit, shape)
}

// writeFigures writes the claims' figures, one key/value line each:
// throughput, latency, outcomes, issuance and the server's counts.
func (r Report) writeFigures(tw io.Writer) {
	fmt.Fprintf(tw, "claims\t%s in %s (%s claims/s)\n", thousands(int64(r.Claims)), human(r.Elapsed), thousands(int64(r.Throughput()+0.5)))
	fmt.Fprintf(tw, "latency\tp50 %s, p99 %s, p99.9 %s, max %s\n",
		msText(r.Latency.P50), msText(r.Latency.P99), msText(r.Latency.P999), msText(r.Latency.Max))
	fmt.Fprintf(tw, "accepted\t%s\n", thousands(r.Accepted))
	rejected := "none"
	if len(r.Rejected) > 0 {
		var parts []string
		for _, code := range sortedKeys(r.Rejected) {
			parts = append(parts, fmt.Sprintf("%s %s", code, thousands(int64(r.Rejected[code]))))
		}
		rejected = strings.Join(parts, ", ")
	}
	fmt.Fprintf(tw, "rejected\t%s\n", rejected)
	if r.AllIssued {
		fmt.Fprintf(tw, "all issued\t%s after the last answer\n", human(r.IssuedAfter))
	} else {
		fmt.Fprintf(tw, "all issued\tNO: gave up %s after the last answer\n", human(r.IssuedAfter))
	}
	fmt.Fprintf(tw, "server counts\taccepted %d, pending %d, issued %d, failed %d, remaining %d\n",
		r.Server.Accepted, r.Server.Pending, r.Server.Issued, r.Server.Failed, r.Server.Remaining)
}

// writeFigures writes the waiting room's figures, one key/value line each;
// accepted is the claims the run had accepted.
func (rm *RoomReport) writeFigures(tw io.Writer, accepted int64) {
	fmt.Fprintf(tw, "waiting room\t%s joined, %s admitted, %s claimed, %s sold out in line, in %s\n",
		thousands(int64(rm.Joined)), thousands(int64(rm.Admitted)), thousands(accepted), thousands(int64(rm.SoldOut)), human(rm.Elapsed))
	if len(rm.InLine) > 0 {
		var parts []string
		for _, k := range sortedKeys(rm.InLine) {
			parts = append(parts, fmt.Sprintf("%s %d", k, rm.InLine[k]))
		}
		fmt.Fprintf(tw, "left the line\t%s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(tw, "joins\t%s in %s (%s joins/s), p50 %s, p99 %s\n", thousands(int64(rm.Joined)), human(rm.JoinElapsed),
		thousands(int64(rm.JoinsPerSecond()+0.5)), msText(rm.JoinLatency.P50), msText(rm.JoinLatency.P99))
	fmt.Fprintf(tw, "status lookups\t%s (%s lookups/s), p50 %s, p99 %s\n", thousands(int64(rm.Lookups)),
		thousands(int64(rm.LookupsPerSecond()+0.5)), msText(rm.LookupLatency.P50), msText(rm.LookupLatency.P99))
	if rm.PowDifficulty > 0 {
		fmt.Fprintf(tw, "proof of work\tdifficulty %d: %s challenges answered, %s solved, p50 %s, p99 %s, max %s a solve (one core each, %.2f M hashes/s)\n",
			rm.PowDifficulty, thousands(int64(rm.Challenges)), thousands(int64(rm.Solves)), msText(rm.SolveTime.P50),
			msText(rm.SolveTime.P99), msText(rm.SolveTime.Max), rm.HashesPerSecond()/1e6)
	}
	if rm.MeasuredRate > 0 {
		fmt.Fprintf(tw, "admission rate\t%.1f/s measured over %s (%d samples), configured %d/s: %+.1f%%\n",
			rm.MeasuredRate, human(rm.RateWindow), rm.RateSamples, rm.AdmitPerSecond, 100*rm.RateError())
	} else {
		fmt.Fprintf(tw, "admission rate\tnot measured: admission ran too briefly (%d samples), configured %d/s\n", rm.RateSamples, rm.AdmitPerSecond)
	}
	fmt.Fprintf(tw, "server room\twaiting %d, admitted %d, passes spent %d, abandoned %d\n",
		rm.Server.Waiting, rm.Server.Admitted, rm.Server.PassesSpent, rm.Server.Abandoned)
}

// writeChecks writes one line per check, then the verdict.
func (r Report) writeChecks(b *strings.Builder) error {
	b.WriteString("\nchecks\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	passed := 0
	for _, c := range r.Checks {
		if c.Status == Pass {
			passed++
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", strings.ToUpper(string(c.Status)), c.Title, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.OK() {
		fmt.Fprintf(b, "\nOK: %d of %d checks passed", passed, len(r.Checks))
		if skipped := len(r.Checks) - passed; skipped > 0 {
			fmt.Fprintf(b, ", %d skipped", skipped)
		}
		b.WriteString("\n")
	} else {
		fmt.Fprintf(b, "\nFAILED: %s\n", strings.Join(r.Failed(), ", "))
	}
	return nil
}

// writeWinners writes the winners section: one line per winner, its rank,
// user, claim and code.
func writeWinners(b *strings.Builder, ws []Winner) {
	fmt.Fprintf(b, "\nfirst %d winners\n", len(ws))
	if len(ws) == 0 {
		b.WriteString("  none issued\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, w := range ws {
		code := w.Code
		if code == "" {
			code = "(no code)"
		}
		fmt.Fprintf(tw, "  #%d\t%s\t%s\t%s\n", w.Rank, w.UserID, w.ClaimID, code)
	}
	_ = tw.Flush() // a strings.Builder does not fail
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(x float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	if x < 0 {
		return -float64(int64(-x*p+0.5)) / p
	}
	return float64(int64(x*p+0.5)) / p
}

// msText prints a latency in milliseconds with a precision that suits it.
func msText(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

// human prints a duration rounded for reading: 85ms, 1.23s, 2m3s.
func human(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// thousands formats n with comma separators: 1,000.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
