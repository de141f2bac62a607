package stream

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// FuzzHandlerResults builds a read of messages from arbitrary entries and
// hands it to handlers that answer anything: nil, one result per message,
// too few or too many, or a panic, whole or in one message. The entries
// become messages unchanged; the runtime always gets exactly one result per
// message (or nil); a panic becomes a failure, of every message when the
// handler panics, of that message alone under PerMessage.
func FuzzHandlerResults(f *testing.F) {
	f.Add([]byte("claim_id=p#1;user=u;rank=1"), uint8(3), uint8(0), uint8(0))
	f.Add([]byte("a=b"), uint8(1), uint8(1), uint8(2))
	f.Add([]byte(""), uint8(0), uint8(2), uint8(0))
	f.Add([]byte("k=;=v;;"), uint8(10), uint8(3), uint8(5))
	f.Add([]byte("x"), uint8(4), uint8(4), uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, n, behaviour, which uint8) {
		entries := make([]rueidis.XRangeEntry, int(n%32))
		for i := range entries {
			fv := map[string]string{}
			for j, b := range raw {
				if (j+i)%3 == 0 {
					fv[string(raw[:j])] = string(raw[j:])
				} else {
					fv[strconv.Itoa(int(b))] = string(raw[:j])
				}
			}
			if i%5 == 4 {
				fv = nil // an entry deleted while pending
			}
			entries[i] = rueidis.XRangeEntry{ID: strconv.Itoa(i) + "-0", FieldValues: fv}
		}
		msgs := toMessages(entries, 1)
		if len(msgs) != len(entries) {
			t.Fatalf("%d entries became %d messages", len(entries), len(msgs))
		}
		for i, m := range msgs {
			if m.ID != entries[i].ID || m.Deliveries != 1 || len(m.Fields) != len(entries[i].FieldValues) {
				t.Fatalf("entry %+v became %+v", entries[i], m)
			}
			for k, v := range entries[i].FieldValues {
				if m.Fields[k] != v {
					t.Fatalf("entry %+v became %+v", entries[i], m)
				}
			}
		}

		boom := errors.New("boom")
		var h Handler
		switch behaviour % 5 {
		case 0:
			h = HandlerFunc(func(context.Context, []Message) []error { return nil })
		case 1:
			h = HandlerFunc(func(_ context.Context, ms []Message) []error {
				errs := make([]error, len(ms))
				for i := range errs {
					if i%2 == int(which)%2 {
						errs[i] = boom
					}
				}
				return errs
			})
		case 2:
			h = HandlerFunc(func(_ context.Context, ms []Message) []error { return make([]error, len(ms)+1+int(which)%3) })
		case 3:
			h = HandlerFunc(func(context.Context, []Message) []error { panic(string(raw)) })
		case 4:
			h = PerMessage(func(_ context.Context, m Message) error {
				if m.ID == strconv.Itoa(int(which)%max(len(msgs), 1))+"-0" {
					panic(boom)
				}
				return nil
			})
		}
		errs := callHandler(context.Background(), h, time.Second, msgs)
		if errs != nil && len(errs) != len(msgs) {
			t.Fatalf("behaviour %d: %d results for %d messages", behaviour%5, len(errs), len(msgs))
		}
		switch behaviour % 5 {
		case 3:
			for i, err := range errs {
				if !errors.Is(err, ErrPanic) {
					t.Fatalf("message %d of a panicking handler: %v", i, err)
				}
			}
		case 4:
			for i, err := range errs {
				panicked := i == int(which)%max(len(msgs), 1)
				if panicked != (err != nil) || (panicked && !errors.Is(err, ErrPanic) && !errors.Is(err, boom)) {
					t.Fatalf("message %d (panicked %v): %v", i, panicked, err)
				}
			}
		}
	})
}
