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

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

// Grant upload limits.
const (
	MaxGrantIDs       = 10_000 // user ids per JSON request
	MaxGrantLineBytes = 64 << 10
	grantBatch        = 500 // user ids per Redis script call when streaming
	maxReportedErrors = 100
)

func (s *Server) postGrants(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if isNDJSON(r) {
		d, done, ok := s.streams.beginStream(w, r)
		if !ok {
			return
		}
		defer done()
		s.streamGrants(w, r, id, d)
		return
	}
	var in api.GrantsUpload
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
	writeJSON(w, http.StatusAccepted, api.GrantResult{Enqueued: res.Enqueued, Duplicates: res.Duplicates, Errors: []api.LineError{}})
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
	out := api.GrantResult{}
	out.Rejected, out.Errors, err = s.readUpload(r, d, "grant", id, grantBatch, parseGrantLine, func(batch []string) error {
		res, err := s.cfg.Manager.Grant(r.Context(), id, batch)
		if err != nil {
			return err
		}
		out.Enqueued += res.Enqueued
		out.Duplicates += res.Duplicates
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, out)
}

// readUpload reads the NDJSON lines of an upload (what: "grant", "code")
// to promotion id: each line pushes the connection's deadlines ahead, so an
// upload may take any time as long as its lines keep coming. parse turns a
// line into a value or a reason to reject it; the values go to flush in
// batches of size, the last one when the body ends. An upload that breaks
// off ends the read, logged: what was applied stays applied. It returns the
// lines rejected (the first maxReportedErrors reported), or the first
// error of flush.
func (s *Server) readUpload(r *http.Request, d *streamDeadline, what, id string, size int,
	parse func([]byte) (string, string), flush func([]string) error) (int, []api.LineError, error) {
	rejected, errs := 0, []api.LineError{}
	reject := func(line int, code, detail string) {
		rejected++
		if len(errs) < maxReportedErrors {
			errs = append(errs, api.LineError{Line: line, Code: code, Detail: detail})
		}
	}
	batch := make([]string, 0, size)
	br := bufio.NewReaderSize(r.Body, 64<<10)
	for line := 1; ; line++ {
		d.touch()
		raw, tooLong, err := readLine(br, MaxGrantLineBytes)
		if err != nil && !errors.Is(err, io.EOF) {
			s.log.WarnContext(r.Context(), what+" upload broke off", "promotion", id, "line", line, "err", err)
			break
		}
		switch {
		case tooLong:
			reject(line, CodeTooLarge, fmt.Sprintf("line is longer than %d bytes", MaxGrantLineBytes))
		case len(bytes.TrimSpace(raw)) == 0:
			// blank lines are ignored
		default:
			if v, detail := parse(raw); detail != "" {
				reject(line, CodeInvalidRequest, detail)
			} else if batch = append(batch, v); len(batch) == size {
				if err := flush(batch); err != nil {
					return rejected, errs, err
				}
				batch = batch[:0]
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(batch) > 0 {
		if err := flush(batch); err != nil {
			return rejected, errs, err
		}
	}
	d.touch()
	return rejected, errs, nil
}

// decodeLine decodes one NDJSON line into v strictly: unknown members and
// data after the value are refused. It returns the reason, "" if none.
func decodeLine(raw []byte, v any) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return "malformed JSON line: " + err.Error()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "unexpected data after the JSON value"
	}
	return ""
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
	var in api.GrantLine
	if detail := decodeLine(raw, &in); detail != "" {
		return "", detail
	}
	if !promotion.ValidID(in.UserID) {
		return "", "user_id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit"
	}
	return in.UserID, ""
}
