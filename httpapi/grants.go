package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/dibsio/dibs/promotion"
)

// Grant upload limits.
const (
	MaxGrantIDs       = 10_000 // user ids per JSON request
	MaxGrantLineBytes = 64 << 10
	grantBatch        = 500 // user ids per Redis script call when streaming
	maxReportedErrors = 100
)

type grantsIn struct {
	UserIDs []string `json:"user_ids"`
}

type lineError struct {
	Line   int    `json:"line"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

type grantsOut struct {
	Enqueued   int         `json:"enqueued"`
	Duplicates int         `json:"duplicates"`
	Rejected   int         `json:"rejected"`
	Errors     []lineError `json:"errors"`
}

func (s *Server) postGrants(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if isNDJSON(r) {
		d, done, ok := s.beginStream(w, r)
		if !ok {
			return
		}
		defer done()
		s.streamGrants(w, r, id, d)
		return
	}
	var in grantsIn
	if pr := decodeJSON(w, r, MaxGrantBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return
	}
	if len(in.UserIDs) == 0 || len(in.UserIDs) > MaxGrantIDs {
		problem(CodeInvalidRequest, fmt.Sprintf("user_ids must hold 1 to %d ids", MaxGrantIDs)).withField("user_ids").write(w, r)
		return
	}
	for i, u := range in.UserIDs {
		if !promotion.ValidID(u) {
			problem(CodeInvalidRequest, fmt.Sprintf("user_ids[%d] is not a valid id; nothing was enqueued", i)).withField("user_ids").write(w, r)
			return
		}
	}
	res, err := s.cfg.Manager.Grant(r.Context(), id, in.UserIDs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, grantsOut{Enqueued: res.Enqueued, Duplicates: res.Duplicates, Errors: []lineError{}})
}

// isNDJSON says whether r is a streamed NDJSON upload.
func isNDJSON(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/x-ndjson" || mt == "application/ndjson" || mt == "application/jsonl"
}

// streamGrants applies an NDJSON upload line by line, in batches: each valid
// line is enqueued, each bad line is rejected and reported.
func (s *Server) streamGrants(w http.ResponseWriter, r *http.Request, id string, d *streamDeadline) {
	// Fail fast on an unknown or wrong-mode promotion before reading the body.
	v, err := s.cfg.Manager.Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if v.Mode != promotion.ModeGrant {
		s.fail(w, r, promotion.ErrWrongMode)
		return
	}
	out := grantsOut{Errors: []lineError{}}
	reject := func(line int, code, detail string) {
		out.Rejected++
		if len(out.Errors) < maxReportedErrors {
			out.Errors = append(out.Errors, lineError{Line: line, Code: code, Detail: detail})
		}
	}
	batch := make([]string, 0, grantBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := s.cfg.Manager.Grant(r.Context(), id, batch)
		batch = batch[:0]
		if err != nil {
			return err
		}
		out.Enqueued += res.Enqueued
		out.Duplicates += res.Duplicates
		return nil
	}
	// An upload may take any time as long as its lines keep coming: each
	// line pushes the connection's deadlines ahead.
	br := bufio.NewReaderSize(r.Body, 64<<10)
	for line := 1; ; line++ {
		d.touch()
		raw, tooLong, err := readLine(br, MaxGrantLineBytes)
		if err != nil && !errors.Is(err, io.EOF) {
			// The upload broke off: what was applied stays applied.
			if ferr := flush(); ferr != nil {
				s.fail(w, r, ferr)
				return
			}
			s.log.Warn("grant upload broke off", "promotion", id, "line", line, "err", err)
			break
		}
		switch {
		case tooLong:
			reject(line, CodeTooLarge, fmt.Sprintf("line is longer than %d bytes", MaxGrantLineBytes))
		case len(bytes.TrimSpace(raw)) == 0:
			// blank lines are ignored
		default:
			if u, detail := parseGrantLine(raw); detail != "" {
				reject(line, CodeInvalidRequest, detail)
			} else {
				batch = append(batch, u)
				if len(batch) == grantBatch {
					if ferr := flush(); ferr != nil {
						s.fail(w, r, ferr)
						return
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if err := flush(); err != nil {
		s.fail(w, r, err)
		return
	}
	d.touch()
	writeJSON(w, http.StatusAccepted, out)
}

// readLine reads one line of at most limit bytes; a longer line is consumed
// to its end and reported with tooLong.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(buf)+len(chunk) > limit {
			tooLong = true
		} else {
			buf = append(buf, chunk...)
		}
		if err != nil {
			if len(buf) > 0 || tooLong {
				return buf, tooLong, io.EOF
			}
			return nil, false, err
		}
		if !isPrefix {
			return buf, tooLong, nil
		}
	}
}

func parseGrantLine(raw []byte) (string, string) {
	var in struct {
		UserID string `json:"user_id"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return "", "malformed JSON line: " + err.Error()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", "unexpected data after the JSON value"
	}
	if !promotion.ValidID(in.UserID) {
		return "", "user_id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit"
	}
	return in.UserID, ""
}
