package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Admin requests sent with an Idempotency-Key keep one record in Redis under
// <KeyPrefix>admin-idem:<key>, a JSON idemRecord:
//
//   - while the first request runs: its fingerprint and a nonce (Status 0),
//     with a short expiry (idemLockMargin past the request's deadline), so a
//     process that dies mid-request does not hold the key for a day;
//   - once it answered below 500: the fingerprint and the answer, for
//     Config.IdempotencyTTL;
//   - an answer of 500 or above is not kept: the record is deleted and the
//     next request with the key runs again.
type idemRecord struct {
	// Fingerprint is the SHA-256 of method, path and body.
	Fingerprint string `json:"fp"`
	// Nonce tells this run's record from a later one with the same key.
	Nonce  string            `json:"nonce,omitempty"`
	Status int               `json:"status,omitempty"`
	Header map[string]string `json:"header,omitempty"`
	Body   string            `json:"body,omitempty"`
}

// idemLockMargin is how long a running record outlives the request's own
// deadline.
const idemLockMargin = 5 * time.Second

// replayedHeaders are the headers a stored answer keeps.
var replayedHeaders = []string{"Content-Type", "Location", "Retry-After"}

// idemFinish stores a request's answer in place of its running record.
// KEYS[1] the record; ARGV[1] the running record this request set, ARGV[2]
// the answer record, ARGV[3] its time to live in milliseconds. Reply: 1 if
// stored, 0 if the key no longer holds this request's running record (it
// expired, and maybe another request took the key).
var idemFinish = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`)

// idemRelease deletes a request's running record so the key can run again.
// KEYS[1] the record; ARGV[1] the running record this request set. Reply: 1
// if deleted, 0 if the key no longer holds that record.
var idemRelease = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0`)

// idempotency keeps the records of the admin requests sent with an
// Idempotency-Key, in Redis under its prefix, and replays their answers.
type idempotency struct {
	*failureLogs
	redis   rueidis.Client
	prefix  string        // Config.KeyPrefix
	timeout time.Duration // Config.RequestTimeout: a keyed request's deadline
	ttl     time.Duration // Config.IdempotencyTTL

	// testHookKeyed, if set, runs once a keyed admin request holds its
	// Idempotency-Key record and before its handler runs. Set by tests only.
	testHookKeyed func()
}

// idempotent makes an admin POST safe to retry: with an Idempotency-Key the
// first request runs and its answer is kept; a retry with the same key and
// the same method, path and body gets that answer again (with the header
// Idempotent-Replayed: true); the same key with another request gets 422
// idempotency_key_reused, and while the first still runs 409
// request_in_progress. limit bounds the body read to fingerprint it.
// Without the header, and for a streamed NDJSON upload (applied line by line,
// where a re-upload counts duplicates), h runs as it is.
func (s *idempotency) idempotent(limit int64, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values("Idempotency-Key")
		if len(vals) == 0 || isNDJSON(r) {
			h(w, r)
			return
		}
		if len(vals) > 1 || !validIdempotencyKey(vals[0]) {
			problem(CodeInvalidRequest, "Idempotency-Key must be one value of 1-64 printable ASCII characters").withField("Idempotency-Key").write(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				tooLarge(limit).write(w, r)
				return
			}
			problem(CodeInvalidRequest, "the request body could not be read: "+err.Error()).write(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		r = r.WithContext(ctx)
		r.Body = io.NopCloser(bytes.NewReader(body))

		key := s.prefix + "admin-idem:" + vals[0]
		sum := sha256.Sum256([]byte(r.Method + " " + r.URL.Path + "\n" + string(body)))
		fp := hex.EncodeToString(sum[:])
		running, held, pr := s.takeKey(ctx, r, key, fp)
		if pr != nil {
			pr.write(w, r)
			return
		}
		if held != nil {
			s.replay(w, r, held)
			return
		}

		rec := &recorder{ResponseWriter: w}
		finished := false
		defer func() {
			if !finished { // h panicked: let a retry run again
				s.settleKey(r, key, running, nil)
			}
		}()
		if s.testHookKeyed != nil {
			s.testHookKeyed()
		}
		h(rec, r)
		finished = true
		s.settleKey(r, key, running, rec)
	}
}

// takeKey takes the key for this request and returns the running record it
// set; or the finished record to replay; or the problem to answer.
func (s *idempotency) takeKey(ctx context.Context, r *http.Request, key, fp string) (running string, held *idemRecord, pr *Problem) {
	c := s.redis
	mine, _ := json.Marshal(idemRecord{Fingerprint: fp, Nonce: rand.Text()})
	lock := s.timeout + idemLockMargin
	// A record can expire between SET NX and GET: then take it again.
	for range 3 {
		err := c.Do(ctx, c.B().Set().Key(key).Value(string(mine)).Nx().Px(lock).Build()).Error()
		if err == nil {
			return string(mine), nil, nil
		}
		if !rueidis.IsRedisNil(err) {
			return "", nil, s.problemFor(r, fmt.Errorf("take idempotency key: %w", err))
		}
		raw, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return "", nil, s.problemFor(r, fmt.Errorf("read idempotency key: %w", err))
		}
		var rec idemRecord
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return "", nil, s.problemFor(r, fmt.Errorf("idempotency record %s: %w", key, err))
		}
		switch {
		case rec.Fingerprint != fp:
			return "", nil, problem(CodeIdempotencyKeyReused, "this Idempotency-Key was used for another request (method, path or body differ); use a new key")
		case rec.Status == 0:
			return "", nil, problem(CodeRequestInProgress, "a request with this Idempotency-Key is still running; retry shortly").retry(1)
		}
		return "", &rec, nil
	}
	return "", nil, s.problemFor(r, errors.New("idempotency key kept expiring while read"))
}

// settleKey keeps the answer rec recorded, or releases the key when there is
// no answer to keep (rec nil, or a status of 500 or above).
func (s *idempotency) settleKey(r *http.Request, key, running string, rec *recorder) {
	// The request's context may be done (that can be why it failed); the
	// record must be settled anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), DefaultClaimTimeout)
	defer cancel()
	c := s.redis
	var err error
	if rec == nil || rec.code() >= 500 {
		err = idemRelease.Exec(ctx, c, []string{key}, []string{running}).Error()
	} else {
		var fp idemRecord
		_ = json.Unmarshal([]byte(running), &fp)
		done := idemRecord{Fingerprint: fp.Fingerprint, Status: rec.code(), Header: map[string]string{}, Body: rec.body.String()}
		for _, h := range replayedHeaders {
			if v := rec.Header().Get(h); v != "" {
				done.Header[h] = v
			}
		}
		b, _ := json.Marshal(done)
		ttl := strconv.FormatInt(s.ttl.Milliseconds(), 10)
		err = idemFinish.Exec(ctx, c, []string{key}, []string{running, string(b), ttl}).Error()
	}
	if err != nil {
		// The running record expires on its own; until then a retry gets
		// request_in_progress.
		s.log.WarnContext(r.Context(), "settling an Idempotency-Key record", "key", key, "err", err)
	}
}

// replay writes a kept answer.
func (s *idempotency) replay(w http.ResponseWriter, r *http.Request, rec *idemRecord) {
	h := w.Header()
	for k, v := range rec.Header {
		h.Set(k, v)
	}
	h.Set("Cache-Control", "no-store")
	h.Set("Idempotent-Replayed", "true")
	w.WriteHeader(rec.Status)
	_, _ = io.WriteString(w, rec.Body)
}

// recorder passes an answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *recorder) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *recorder) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (c *recorder) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// code is the status written, 200 if the handler wrote nothing.
func (c *recorder) code() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}
