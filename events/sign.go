package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Headers of a webhook delivery.
const (
	HeaderEventID   = "Dibs-Event-Id"
	HeaderEventType = "Dibs-Event-Type"
	HeaderSignature = "Dibs-Signature"
)

// Errors of Verify.
var (
	// ErrBadSignature means the header is malformed or no v1 value matches.
	ErrBadSignature = errors.New("events: bad signature")
	// ErrStale means the signature's time is further from now than the
	// tolerance: a replayed delivery, or a clock far off.
	ErrStale = errors.New("events: signature time out of tolerance")
)

// Sign returns the Dibs-Signature value of body sent at t under secret:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<unix seconds>.<body>">".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks a Dibs-Signature header against body and secret, and that
// its time is within tolerance of now (no check if tolerance is 0). Several
// v1 values (a sender mid-rotation) pass if one matches.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var (
		ts   string
		sigs []string
	)
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrBadSignature
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			ok = true
		}
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); tolerance > 0 && (d > tolerance || d < -tolerance) {
		return ErrStale
	}
	return nil
}
