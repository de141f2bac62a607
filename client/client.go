package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxAnswerBytes bounds how much of one JSON answer the client reads; a
// list page of 1,000 promotions is well below it.
const MaxAnswerBytes = 32 << 20

// Client speaks the dibs HTTP API of one server. It holds no state besides
// its settings and is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/path], without a trailing slash
	http  *http.Client
	admin string // admin bearer token; empty: none
	user  string // user bearer token; empty: none
	agent string
}

// Option configures a Client.
type Option func(*Client)

// WithAdminToken sends token as the bearer token of the admin endpoints
// (and of the user endpoints when no user token is set: the server takes an
// admin token in place of any user's).
func WithAdminToken(token string) Option { return func(c *Client) { c.admin = token } }

// WithUserToken sends token as the bearer token of the user endpoints:
// claims, a user's claim status, the waiting room and the balance. Needed
// only when the server checks user tokens (the edge's user_tokens).
func WithUserToken(token string) Option { return func(c *Client) { c.user = token } }

// WithHTTPClient sends the requests through hc. Defaults to a client of
// http.DefaultTransport without a timeout: bound each call with its
// context.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header. Defaults to "dibs-client".
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// New returns a client of the server at baseURL (http or https, with a host;
// a path prefix is kept). It fails only on a bad URL.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: server URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server URL %q: want an http or https URL with a host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("client: server URL %q: no query, fragment or user info", baseURL)
	}
	c := &Client{base: strings.TrimRight(u.String(), "/"), agent: "dibs-client"}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	return c, nil
}

// BaseURL is the server's URL as given to New, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// RequestError is a request that got no answer from the server: it could not
// be sent, the connection failed, or the context ended first. Err says why.
type RequestError struct {
	// Method and URL are the request's.
	Method, URL string
	// Err is the transport's error.
	Err error
}

// Error implements error.
func (e *RequestError) Error() string { return e.Method + " " + e.URL + ": " + e.Err.Error() }

// Unwrap returns Err, so errors.Is(err, context.DeadlineExceeded) works.
func (e *RequestError) Unwrap() error { return e.Err }

// RequestOption adds to one request: an Idempotency-Key, an entry token.
type RequestOption func(*http.Request)

// IdempotencyKey sends key as the Idempotency-Key header (1–64 printable
// ASCII): a retry with the same key and the same request gets the first
// answer again and changes nothing.
func IdempotencyKey(key string) RequestOption {
	return func(r *http.Request) { r.Header.Set("Idempotency-Key", key) }
}

// RequestID sends id as the X-Request-Id header: the server answers and
// logs the request under it (1–128 visible ASCII characters; another is
// replaced by an id the server makes).
func RequestID(id string) RequestOption {
	return func(r *http.Request) { r.Header.Set("X-Request-Id", id) }
}

// EntryToken sends token as the X-Entry-Token header of a claim on a
// promotion with a waiting room.
func EntryToken(token string) RequestOption {
	return func(r *http.Request) { r.Header.Set("X-Entry-Token", token) }
}

// auth says which bearer token a route takes.
type auth int

const (
	authAdmin auth = iota // admin token (also sent to the public read endpoints)
	authUser              // user token, else the admin token
	authNone              // none
)

// request is one call.
type request struct {
	method string
	path   string     // escaped path below the base URL
	query  url.Values // nil: none
	auth   auth
	body   io.Reader // nil: none
	ctype  string    // Content-Type of body
	accept string    // defaults to application/json
	opts   []RequestOption
}

// jsonBody marshals v as a request body.
func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: encode request: %w", err)
	}
	return bytes.NewReader(b), nil
}

// send sends rq and returns the answer if its status is 2xx; otherwise it
// reads the problem and returns it as *Problem. The caller closes the body.
func (c *Client) send(ctx context.Context, rq request) (*http.Response, error) {
	u := c.base + rq.path
	if len(rq.query) > 0 {
		u += "?" + rq.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, u, rq.body)
	if err != nil {
		return nil, &RequestError{Method: rq.method, URL: u, Err: err}
	}
	if rq.body != nil {
		ct := rq.ctype
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	accept := rq.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.agent)
	if token := c.tokenFor(rq.auth); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, o := range rq.opts {
		o(req)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error // says the method and URL again
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &RequestError{Method: rq.method, URL: u, Err: err}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readProblem(resp)
}

func (c *Client) tokenFor(a auth) string {
	switch a {
	case authAdmin:
		return c.admin
	case authUser:
		if c.user != "" {
			return c.user
		}
		return c.admin
	}
	return ""
}

// do sends rq and decodes a 2xx JSON answer into out (nil: the answer is
// read and dropped).
func (c *Client) do(ctx context.Context, rq request, out any) error {
	resp, err := c.send(ctx, rq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswerBytes))
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return &RequestError{Method: rq.method, URL: resp.Request.URL.String(), Err: fmt.Errorf("read answer: %w", err)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: %s %s: decode %d answer %q: %w", rq.method, rq.path, resp.StatusCode, snippet(data), err)
	}
	return nil
}

// readProblem makes a *Problem of a non-2xx answer. An answer that is not a
// problem document (a proxy's error page) gets a Problem with its status,
// no code, and the start of the body as Detail.
func readProblem(resp *http.Response) *Problem {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	p := &Problem{}
	if json.Unmarshal(data, p) != nil || p.Status == 0 && p.Code == "" {
		p = &Problem{Title: http.StatusText(resp.StatusCode), Detail: snippet(data)}
	}
	p.Status = resp.StatusCode
	if p.RequestID == "" {
		p.RequestID = resp.Header.Get("X-Request-Id")
	}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
		p.RetryAfter = time.Duration(s) * time.Second
	}
	return p
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// path joins escaped segments under /v1.
func path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// IsProblem reports whether err holds a *Problem with the given code.
func IsProblem(err error, code string) bool {
	var p *Problem
	return errors.As(err, &p) && p.Code == code
}
