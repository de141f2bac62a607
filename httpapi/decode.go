package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/dibsio/dibs/api"
)

// MaxBodyBytes is the largest JSON request body accepted (grant uploads
// excepted, see MaxGrantBodyBytes).
const MaxBodyBytes = 64 << 10

// MaxGrantBodyBytes bounds a JSON grant upload: 10,000 ids of up to 64
// characters each fit.
const MaxGrantBodyBytes = 1 << 20

// decodeJSON reads one strict JSON value from the body into v: at most limit
// bytes, no unknown fields, nothing after the value.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *Problem {
	// The body must be JSON whatever the Content-Type says: clients such as
	// `curl -d` label JSON as a form, and the strict decoding below is what
	// keeps bad input out.
	return decodeJSONFrom(http.MaxBytesReader(w, r.Body, limit), limit, v)
}

// decodeJSONFrom is decodeJSON on a body already bounded to limit bytes.
func decodeJSONFrom(body io.Reader, limit int64, v any) *Problem {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(limit)
		}
		return problem(CodeInvalidRequest, "unexpected data after the JSON value")
	}
	return nil
}

// decodeClaim reads a claim's body, {"user_id": "…"}, into in. The shape
// clients send — exactly that object, an id without escapes, whitespace
// only around it — is read without reflection, into w's scratch space
// (scratchOf); any other body goes through decodeJSON's strict decoding,
// so bad input is answered exactly as decodeJSON answers it.
func decodeClaim(w http.ResponseWriter, r *http.Request, in *api.UserRef) *Problem {
	// A body that fits the scratch space is under MaxBodyBytes: it needs
	// no http.MaxBytesReader, only a longer one does.
	raw, err := readAll(r.Body, scratchOf(w), false)
	if err == nil && len(raw) == cap(raw) {
		raw, err = readAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes-int64(len(raw))), raw, true)
	}
	if err != nil {
		return jsonProblem(err, MaxBodyBytes)
	}
	if u, ok := plainClaim(raw); ok {
		in.UserID = u
		return nil
	}
	var slow api.UserRef // on the heap, as decodeJSONFrom takes any: only here
	if pr := decodeJSONFrom(bytes.NewReader(raw), MaxBodyBytes, &slow); pr != nil {
		return pr
	}
	*in = slow
	return nil
}

// readAll reads r to its end, appending to buf: grown as needed, or, with
// grow false, only until buf is full (len(buf) == cap(buf) then tells
// that r may hold more).
func readAll(r io.Reader, buf []byte, grow bool) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if !grow {
				return buf, nil
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// plainClaimPrefix and plainClaimSuffix frame the canonical claim body.
const (
	plainClaimPrefix = `{"user_id":"`
	plainClaimSuffix = `"}`
)

// plainClaim returns the user id of a body that is exactly
// {"user_id":"<id>"}, with JSON whitespace at most before and after and an
// id of the characters user ids are made of (no escapes possible), and
// whether raw had that shape. For such a body it is what encoding/json
// decodes.
func plainClaim(raw []byte) (string, bool) {
	raw = trimJSONSpace(raw)
	if len(raw) < len(plainClaimPrefix)+len(plainClaimSuffix) ||
		string(raw[:len(plainClaimPrefix)]) != plainClaimPrefix ||
		string(raw[len(raw)-len(plainClaimSuffix):]) != plainClaimSuffix {
		return "", false
	}
	id := raw[len(plainClaimPrefix) : len(raw)-len(plainClaimSuffix)]
	for _, c := range id {
		if !idByte(c) {
			return "", false
		}
	}
	return string(id), true
}

// idByte reports whether c may appear in a user id (see promotion.ValidID).
func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == ':' || c == '@'
}

// trimJSONSpace trims the whitespace JSON allows around a value.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func tooLarge(limit int64) *Problem {
	return problem(CodeTooLarge, fmt.Sprintf("request body is larger than %d bytes", limit))
}

func jsonProblem(err error, limit int64) *Problem {
	var (
		mbe  *http.MaxBytesError
		se   *json.SyntaxError
		ute  *json.UnmarshalTypeError
		perr *fieldError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge(limit)
	case errors.Is(err, io.EOF):
		return problem(CodeInvalidRequest, "request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return problem(CodeInvalidRequest, "request body is truncated JSON")
	case errors.As(err, &se):
		return problem(CodeInvalidRequest, fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se))
	case errors.As(err, &ute):
		return problem(CodeInvalidRequest, fmt.Sprintf("field %s must be %s, got %s", ute.Field, jsonKind(ute.Type), jsonValueKind(ute.Value))).withField(ute.Field)
	case errors.As(err, &perr):
		return problem(CodeInvalidRequest, perr.msg).withField(perr.field)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return problem(CodeInvalidRequest, "unknown field "+strconv.Quote(f)).withField(f)
	}
	return problem(CodeInvalidRequest, "malformed JSON: "+err.Error())
}

// jsonKind names what a field of Go type t takes, in JSON's words rather
// than Go's.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// jsonValueKind names the JSON value json.UnmarshalTypeError describes
// ("string", "number 1.5", "array", …) with its article.
func jsonValueKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "array", "object":
		return "an " + kind
	case "bool":
		return "true or false"
	case "":
		return "something else"
	}
	return "a " + kind
}

// fieldError is returned by custom UnmarshalJSON methods.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.msg }

// Pagination limits.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// page parses ?limit= and ?cursor=.
func page(r *http.Request) (after string, limit int, p *Problem) {
	q := r.URL.Query()
	limit = DefaultPageLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageLimit {
			return "", 0, problem(CodeInvalidRequest, fmt.Sprintf("limit must be an integer from 1 to %d", MaxPageLimit)).withField("limit")
		}
		limit = n
	}
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || len(b) == 0 || len(b) > 200 {
			return "", 0, problem(CodeInvalidRequest, "cursor is not one this server issued").withField("cursor")
		}
		after = string(b)
	}
	return after, limit, nil
}

// nextCursor returns the cursor after last, or nil on the last page.
func nextCursor(last string, n, limit int) *string {
	if n < limit || last == "" {
		return nil
	}
	c := base64.RawURLEncoding.EncodeToString([]byte(last))
	return &c
}

// validIdempotencyKey: 1–64 printable ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}
