package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of WatchQueue.
const (
	// DefaultWatchBackoff is the first wait before reconnecting when the
	// server advises none (it advises 2 s with `retry:`).
	DefaultWatchBackoff = time.Second
	// DefaultWatchMaxBackoff is the longest wait between two attempts.
	DefaultWatchMaxBackoff = 30 * time.Second
	// DefaultWatchPoll is the wait between two polls when an answer has no
	// poll_after_ms.
	DefaultWatchPoll = time.Second
	// WatchStall is how long a stream may stay silent before WatchQueue
	// takes it for cut and reconnects: three of the server's keep-alive
	// periods (15 s).
	WatchStall = 45 * time.Second
	// maxEventLine bounds one line of an event stream.
	maxEventLine = 64 << 10
)

// WatchOption tunes WatchQueue.
type WatchOption func(*watchConfig)

type watchConfig struct {
	backoff, maxBackoff time.Duration // backoff 0: the server's retry advice
	poll                bool
	onRetry             func(error, time.Duration)
}

// WatchBackoff sets the waits before trying again after a stream was cut
// or a request failed: first, doubled at each failure in a row up to most
// (each wait is taken at random between its half and itself, so that the
// clients of a restarted server do not come back all at once). Defaults to
// the server's `retry:` advice (else DefaultWatchBackoff) and
// DefaultWatchMaxBackoff.
func WatchBackoff(first, most time.Duration) WatchOption {
	return func(c *watchConfig) { c.backoff, c.maxBackoff = first, most }
}

// WatchPolling asks for the JSON form after each poll_after_ms instead of
// an event stream (the way of a client that cannot hold a connection
// open).
func WatchPolling() WatchOption { return func(c *watchConfig) { c.poll = true } }

// WatchOnRetry has f told each failure that WatchQueue tries again after,
// with the wait before it does (for logs and metrics).
func WatchOnRetry(f func(err error, wait time.Duration)) WatchOption {
	return func(c *watchConfig) { c.onRetry = f }
}

// WatchQueue follows userID's standing (empty: the user of the user token)
// in a promotion's waiting room and yields it each time it changes,
// ending after the first final one (any status but QueueWaiting and
// QueuePrequeue: QueueAdmitted carries the entry token to claim with). It
// follows the server-sent event stream of GET …/queue/{user_id}: a stream
// that is cut or ends early is opened again after a backoff, and where the
// server answers no stream (it serves none, or its streams are all taken:
// 503 overloaded) it polls the JSON form after poll_after_ms, asking for a
// stream again at each poll. Each attempt checks the user in, as
// QueueStatus does.
//
// An error it does not retry ends the sequence after it is yielded: a
// *Problem the server will answer again (not_found for a user who never
// joined, sold_out, ended, invalid_request, unauthorized…), or ctx's error
// once ctx ends. Failed requests, 5xx answers and 429 are retried; pass
// WatchOnRetry to see them. Breaking out of the loop closes the stream.
func (c *Client) WatchQueue(ctx context.Context, promotion, userID string, opts ...WatchOption) iter.Seq2[*QueueStanding, error] {
	cfg := watchConfig{maxBackoff: DefaultWatchMaxBackoff}
	for _, o := range opts {
		o(&cfg)
	}
	return func(yield func(*QueueStanding, error) bool) {
		w := &queueWatch{c: c, cfg: cfg, path: path("promotions", promotion, "queue", userID), yield: yield}
		w.run(ctx)
	}
}

// queueWatch is one run of WatchQueue's sequence.
type queueWatch struct {
	c     *Client
	cfg   watchConfig
	path  string
	yield func(*QueueStanding, error) bool
	last  []byte        // the data of the last standing yielded
	retry time.Duration // the server's retry advice; 0 before any
	fails int           // failures in a row
}

// errStop ends the run: the consumer stopped, or a final standing was
// yielded.
var errStop = errors.New("stop")

func (w *queueWatch) run(ctx context.Context) {
	for {
		wait, err := w.attempt(ctx)
		if errors.Is(err, errStop) {
			return
		}
		if ctx.Err() != nil {
			w.yield(nil, ctx.Err())
			return
		}
		if err != nil {
			if !retryable(err) {
				w.yield(nil, err)
				return
			}
			w.fails++
			wait = max(wait, w.backoff())
			if w.cfg.onRetry != nil {
				w.cfg.onRetry(err, wait)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			w.yield(nil, ctx.Err())
			return
		case <-t.C:
		}
	}
}

// attempt asks for the standing once: it follows an event stream to its
// end, or takes one JSON answer. It returns the wait before the next
// attempt (a poll's, or a Retry-After), and the error that ended it
// (errStop when the run is over).
func (w *queueWatch) attempt(ctx context.Context) (time.Duration, error) {
	accept := eventStreamType
	if w.cfg.poll {
		accept = "application/json"
	}
	resp, err := w.c.send(ctx, request{method: http.MethodGet, path: w.path, auth: authUser, accept: accept})
	var p *Problem
	if errors.As(err, &p) {
		if p.Code == CodeOverloaded && p.Status == http.StatusServiceUnavailable && !w.cfg.poll {
			// Every stream of the instance is taken: poll meanwhile.
			return w.pollOnce(ctx)
		}
		return p.RetryAfter, err
	}
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == eventStreamType {
		return w.follow(ctx, resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return 0, &RequestError{Method: http.MethodGet, URL: resp.Request.URL.String(), Err: fmt.Errorf("read answer: %w", err)}
	}
	return w.take(data)
}

// pollOnce reads the JSON form once, for a watch whose stream was refused.
func (w *queueWatch) pollOnce(ctx context.Context) (time.Duration, error) {
	resp, err := w.c.send(ctx, request{method: http.MethodGet, path: w.path, auth: authUser})
	if err != nil {
		var p *Problem
		if errors.As(err, &p) {
			return p.RetryAfter, err
		}
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return 0, &RequestError{Method: http.MethodGet, URL: resp.Request.URL.String(), Err: fmt.Errorf("read answer: %w", err)}
	}
	return w.take(data)
}

// take yields the standing of a JSON answer and returns the wait before
// the next poll.
func (w *queueWatch) take(data []byte) (time.Duration, error) {
	st, err := w.emit(data)
	if err != nil {
		return 0, err
	}
	w.fails = 0
	if st.PollAfterMS != nil && *st.PollAfterMS > 0 {
		return time.Duration(*st.PollAfterMS) * time.Millisecond, nil
	}
	return DefaultWatchPoll, nil
}

// emit decodes a standing and yields it unless it equals the last one.
// errStop once the run is over.
func (w *queueWatch) emit(data []byte) (*QueueStanding, error) {
	var st QueueStanding
	if err := json.Unmarshal(data, &st); err != nil || st.Status == "" {
		return nil, fmt.Errorf("client: GET %s: not a standing: %q", w.path, snippet(data))
	}
	if !bytes.Equal(data, w.last) {
		w.last = append(w.last[:0], data...)
		if !w.yield(&st, nil) {
			return nil, errStop
		}
	}
	if st.Status != QueueWaiting && st.Status != QueuePrequeue {
		return nil, errStop
	}
	return &st, nil
}

// follow reads an event stream until it ends, yielding each status
// event's standing. A stream that ends or is cut before a final standing
// returns the error that says so, to try again after a backoff.
func (w *queueWatch) follow(ctx context.Context, resp *http.Response) (time.Duration, error) {
	// A stream silent for WatchStall is dead: closing the body ends the read.
	stall := time.AfterFunc(WatchStall, func() { resp.Body.Close() })
	defer stall.Stop()
	r := bufio.NewReaderSize(resp.Body, 4096)
	var name string
	var data []byte
	for {
		line, err := readLine(r)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if err == io.EOF {
				err = errors.New("the event stream ended before a final standing")
			}
			return 0, &RequestError{Method: http.MethodGet, URL: resp.Request.URL.String(), Err: err}
		}
		stall.Reset(WatchStall)
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if (name == "status" || name == "") && len(data) > 0 {
				if _, err := w.emit(data); err != nil {
					return 0, err
				}
				w.fails = 0
			}
			name, data = "", data[:0]
		case field == "": // a comment: a keep-alive
		case field == "event":
			name = value
		case field == "data":
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
		case field == "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
				w.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// readLine reads one line of an event stream without its end (LF, CRLF
// or CR before LF), at most maxEventLine bytes.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		frag, err := r.ReadSlice('\n')
		b = append(b, frag...)
		if len(b) > maxEventLine {
			return "", errors.New("event stream line too long")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
	}
}

// backoff is the wait after w.fails failures in a row: the first wait
// doubled per failure past the first, up to the most, taken at random
// between its half and itself.
func (w *queueWatch) backoff() time.Duration {
	d := w.cfg.backoff
	if d <= 0 {
		d = w.retry
	}
	if d <= 0 {
		d = DefaultWatchBackoff
	}
	for i := 1; i < w.fails && d < w.cfg.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.cfg.maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// retryable tells whether WatchQueue tries again after err: a request that
// got no answer, a 5xx answer or 429; never a problem the server will
// answer again.
func retryable(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status >= 500 || p.Status == http.StatusTooManyRequests || p.Status == http.StatusRequestTimeout
	}
	var re *RequestError
	return errors.As(err, &re)
}

// eventStreamType is the media type of server-sent events.
const eventStreamType = "text/event-stream"
