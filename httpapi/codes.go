package httpapi

import (
	"fmt"
	"net/http"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
)

// Code upload limits.
const (
	// MaxUploadCodes bounds the codes of one JSON upload.
	MaxUploadCodes = 10_000
	// MaxCodesBodyBytes bounds a JSON code upload: 10,000 codes of up to
	// 64 bytes, quoted and escaped.
	MaxCodesBodyBytes = 2 << 20
	// codesBatch is how many codes of a streamed upload are added in one
	// transaction.
	codesBatch = 1000
)

// addCodes adds what one addition to the pool did to o.
func addCodes(o *api.CodesResult, a promotion.PoolAdded) {
	o.Added += a.Added
	o.Duplicates += a.Duplicates
	o.Total, o.Free, o.Stock = a.Total, a.Free, a.Stock
}

// postCodes adds codes to a coupon promotion's pool: a JSON body
// {"codes": [...]} applied all or nothing, or NDJSON lines {"code": "..."}
// applied in batches as they come, each bad line rejected and reported.
func (s *Server) postCodes(w http.ResponseWriter, r *http.Request) {
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
		s.streamCodes(w, r, id, d)
		return
	}
	var in api.CodesUpload
	if pr := decodeJSON(w, r, MaxCodesBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return
	}
	if len(in.Codes) == 0 || len(in.Codes) > MaxUploadCodes {
		problem(CodeInvalidRequest, fmt.Sprintf("codes must hold 1 to %d codes", MaxUploadCodes)).withField("codes").write(w, r)
		return
	}
	for i, c := range in.Codes {
		if !issue.ValidPoolCode(c) {
			problem(CodeInvalidRequest, fmt.Sprintf("codes[%d] is not 1-%d printable characters without spaces; nothing was added", i, promotion.MaxPoolCodeLength)).withField("codes").write(w, r)
			return
		}
	}
	res, err := s.cfg.Manager.AddCodes(r.Context(), id, in.Codes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.CodesResult{Errors: []api.LineError{}}
	addCodes(&out, res)
	writeJSON(w, http.StatusOK, out)
}

// streamCodes applies an NDJSON upload line by line, in batches.
func (s *Server) streamCodes(w http.ResponseWriter, r *http.Request, id string, d *streamDeadline) {
	// Fail fast on an unknown promotion, a wrong kind or a late pool,
	// before reading the body.
	if _, err := s.cfg.Manager.AddCodes(r.Context(), id, nil); err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.CodesResult{}
	var err error
	out.Rejected, out.Errors, err = s.readUpload(r, d, "code", id, codesBatch, parseCodeLine, func(batch []string) error {
		res, err := s.cfg.Manager.AddCodes(r.Context(), id, batch)
		if err != nil {
			return err
		}
		addCodes(&out, res)
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if out.Stock == 0 {
		// Nothing was added: report the pool as it stands.
		res, err := s.cfg.Manager.AddCodes(r.Context(), id, nil)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		addCodes(&out, res)
	}
	writeJSON(w, http.StatusOK, out)
}

func parseCodeLine(raw []byte) (string, string) {
	var in api.CodeLine
	if detail := decodeLine(raw, &in); detail != "" {
		return "", detail
	}
	if !issue.ValidPoolCode(in.Code) {
		return "", fmt.Sprintf("code must be 1-%d printable characters without spaces", promotion.MaxPoolCodeLength)
	}
	return in.Code, ""
}
