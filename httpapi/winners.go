package httpapi

import (
	"context"
	"encoding/csv"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

// csvChunk is how many winners one database read and one flushed chunk of
// the CSV export carry.
const csvChunk = 1000

// winnerRows reads the issued rows of a promotion in rank order;
// promotion.Records is one. Known answers promotion.ErrNotFound for a
// promotion the database does not hold.
type winnerRows interface {
	Known(ctx context.Context, id string) error
	IssuedByRank(ctx context.Context, id string, afterRank int64, limit int) ([]promotion.Issued, error)
}

// csvHeader is the CSV export's first row.
var csvHeader = []string{"rank", "claim_id", "user_id", "slot", "accepted_at", "issued_at", "code"}

// listWinners answers GET /v1/promotions/{id}/claims?status=issued: the
// promotion's issued claims in rank order, a JSON page (bounded like every
// read), or with Accept: text/csv all of them, streamed.
func (s *Server) listWinners(w http.ResponseWriter, r *http.Request) {
	if st := r.URL.Query().Get("status"); st != "" && st != "issued" {
		problem(CodeInvalidRequest, "status must be issued: the list holds the claims written to the database").withField("status").write(w, r)
		return
	}
	if wantsCSV(r) {
		s.winnersCSV(w, r)
		return
	}
	s.bounded(s.winnersPage)(w, r)
}

// wantsCSV says whether the Accept header asks for text/csv.
func wantsCSV(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/csv" {
			return true
		}
	}
	return false
}

// promotionFor checks the path's promotion exists and returns its id; ok
// false means the answer was written.
func (s *Server) promotionFor(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return "", false
	}
	if err := s.rec.winners.Known(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return "", false
	}
	return id, true
}

func (s *Server) winnersPage(w http.ResponseWriter, r *http.Request) {
	after, limit, pr := page(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	var afterRank int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			problem(CodeInvalidRequest, "cursor is not one this server issued").withField("cursor").write(w, r)
			return
		}
		afterRank = n
	}
	id, ok := s.promotionFor(w, r)
	if !ok {
		return
	}
	rows, err := s.rec.winners.IssuedByRank(r.Context(), id, afterRank, limit+1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := api.WinnerPage{Claims: make([]api.Winner, 0, len(rows))}
	for _, is := range rows {
		out.Claims = append(out.Claims, api.Winner{Rank: is.Rank, ClaimID: is.ClaimID, UserID: is.UserID, Slot: is.Slot,
			AcceptedAt: is.AcceptedAt.UTC(), IssuedAt: is.IssuedAt.UTC(), Code: is.Grant.Code})
	}
	if more {
		out.NextCursor = nextCursor(strconv.FormatInt(rows[len(rows)-1].Rank, 10), limit, limit)
	}
	writeJSON(w, http.StatusOK, out)
}

// winnersCSV streams every issued claim of the promotion as CSV, csvChunk
// rows per database read; each chunk is flushed and moves the deadlines
// ahead, so an export of any size runs as long as the client reads. An
// error after the first row can only cut the stream short: the client sees
// a body without its last line ending, which a CSV reader reports.
func (s *Server) winnersCSV(w http.ResponseWriter, r *http.Request) {
	d, done, ok := s.streams.beginStream(w, r)
	if !ok {
		return
	}
	defer done()
	id, ok := s.promotionFor(w, r)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+id+`-winners.csv"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write(csvHeader)
	var after int64
	for {
		d.touch()
		rows, err := s.rec.winners.IssuedByRank(r.Context(), id, after, csvChunk)
		if err != nil {
			s.log.WarnContext(r.Context(), "winners export cut short", "promotion", id, "after_rank", after, "err", err)
			panic(http.ErrAbortHandler) // the status is sent: only breaking the stream tells the client
		}
		for _, is := range rows {
			_ = cw.Write([]string{strconv.FormatInt(is.Rank, 10), is.ClaimID, is.UserID, strconv.Itoa(is.Slot),
				formatTime(is.AcceptedAt), formatTime(is.IssuedAt), is.Grant.Code})
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return // the client went away or stalled past the deadline
		}
		_ = d.rc.Flush()
		if len(rows) < csvChunk {
			return
		}
		after = rows[len(rows)-1].Rank
	}
}
