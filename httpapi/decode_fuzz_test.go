package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/dibsio/dibs/promotion"
)

// FuzzParseGrantLine feeds arbitrary NDJSON lines to the grant line parser.
// It never panics; a line it accepts names a valid user id, which the
// canonical line {"user_id": …} gives back; a valid id in a canonical line is
// always accepted.
func FuzzParseGrantLine(f *testing.F) {
	for _, s := range []string{`{"user_id":"u-1"}`, ` {"user_id" : "u-1"} `, `{"user_id":"u-1"}{}`, `{"user_id":"u-1","x":1}`,
		`{"user_id":1}`, `{"user_id":""}`, `{"user_id":"_u"}`, `{}`, `[]`, `null`, `"u-1"`, `{"user_id":"u\u002d1"}`, `{"USER_ID":"u"}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		u, detail := parseGrantLine(raw)
		if detail == "" {
			if !promotion.ValidID(u) {
				t.Fatalf("parseGrantLine(%q) accepted the invalid id %q", raw, u)
			}
			canon, _ := json.Marshal(map[string]string{"user_id": u})
			if u2, d2 := parseGrantLine(canon); d2 != "" || u2 != u {
				t.Fatalf("parseGrantLine(%q) = %q, but its canonical line %s gives %q, %q", raw, u, canon, u2, d2)
			}
		}
		if s := string(raw); promotion.ValidID(s) {
			canon, _ := json.Marshal(map[string]string{"user_id": s})
			if u2, d2 := parseGrantLine(canon); d2 != "" || u2 != s {
				t.Fatalf("the valid id %q in %s gives %q, %q", s, canon, u2, d2)
			}
		}
	})
}

// FuzzReadLine splits arbitrary uploads into lines with a small buffer and a
// small line limit, and compares the result with a plain split on "\n"
// (a "\r" before the "\n" dropped): the same lines in the same order, and a
// line reported too long exactly when it is longer than the limit.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("{\"user_id\":\"a\"}\n{\"user_id\":\"b\"}\n"), uint8(20))
	f.Add([]byte("a\r\nb\n\nc"), uint8(1))
	f.Add([]byte("0123456789012345678901234567890123456789\nshort\n"), uint8(8))
	f.Add([]byte("x\r"), uint8(0))
	f.Add([]byte("0123456789abcde\r\n0123456789abcdef\r\n"), uint8(15))
	f.Add([]byte(""), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, limit uint8) {
		var want [][]byte
		rest := in
		for len(rest) > 0 {
			line, after, found := bytes.Cut(rest, []byte("\n"))
			if found {
				line = bytes.TrimSuffix(line, []byte("\r"))
			}
			want = append(want, line)
			rest = after
		}
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		for i := 0; ; i++ {
			line, tooLong, err := readLine(br, int(limit))
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("readLine: %v", err)
			}
			if line == nil && !tooLong && errors.Is(err, io.EOF) {
				if i != len(want) {
					t.Fatalf("%q: %d lines read, want %d", in, i, len(want))
				}
				return
			}
			if i >= len(want) {
				t.Fatalf("%q: line %d (%q) past the %d lines", in, i+1, line, len(want))
			}
			if long := len(want[i]) > int(limit); tooLong != long {
				t.Fatalf("%q: line %d of %d bytes, limit %d: tooLong %v", in, i+1, len(want[i]), limit, tooLong)
			}
			if !tooLong && !bytes.Equal(line, want[i]) {
				t.Fatalf("%q: line %d is %q, want %q", in, i+1, line, want[i])
			}
			if errors.Is(err, io.EOF) {
				if i+1 != len(want) {
					t.Fatalf("%q: EOF after line %d of %d", in, i+1, len(want))
				}
				return
			}
		}
	})
}

// FuzzPage feeds arbitrary ?limit= and ?cursor= values to the pagination
// parser. It never panics; a refusal is an invalid_request problem naming
// the field; an accepted limit is within bounds; and a cursor this server
// makes is read back as the key it was made from.
func FuzzPage(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"10", ""}, {"0", ""}, {"1001", ""}, {"-1", "YQ"}, {"x", "!!"}, {"100", "cHJvbW8tMQ"}, {"", "="}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, limit, cursor string) {
		q := url.Values{}
		if limit != "" {
			q.Set("limit", limit)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := httptest.NewRequest("GET", "/v1/promotions?"+q.Encode(), nil)
		after, n, p := page(r)
		if p != nil {
			if p.Code != CodeInvalidRequest || p.Status != 400 || (p.Field != "limit" && p.Field != "cursor") {
				t.Fatalf("page(%q, %q): problem %+v", limit, cursor, p)
			}
			return
		}
		if n < 1 || n > MaxPageLimit {
			t.Fatalf("page(%q, %q): limit %d", limit, cursor, n)
		}
		if after == "" {
			return
		}
		next := nextCursor(after, n, n)
		if next == nil {
			t.Fatalf("no cursor after %q", after)
		}
		r2 := httptest.NewRequest("GET", "/v1/promotions?cursor="+url.QueryEscape(*next), nil)
		if after2, _, p2 := page(r2); p2 != nil || after2 != after {
			t.Fatalf("cursor %q of %q reads back as %q, %+v", *next, after, after2, p2)
		}
	})
}
