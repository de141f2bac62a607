package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/events"
	"github.com/dibsio/dibs/promotion"
)

// eventCursor is the feed's cursor for the events after seq: opaque to
// clients, "e" and the seq in base64url.
func eventCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("e" + strconv.FormatInt(seq, 10)))
}

// parseEventCursor reads what page decoded of a cursor eventCursor made;
// empty is the start.
func parseEventCursor(c string) (int64, bool) {
	if c == "" {
		return 0, true
	}
	digits, ok := strings.CutPrefix(c, "e")
	if !ok || len(digits) > 19 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 63)
	return int64(seq), err == nil
}

// getEvents serves the outbox as a feed: GET /v1/events?cursor=&limit=&type=
// (type repeated or comma-separated). Its next_cursor is never null: a
// page with no events returns the cursor it was given, to read again later.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	raw, limit, pr := page(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	after, ok := parseEventCursor(raw)
	if !ok {
		problem(CodeInvalidRequest, "cursor is not one this server issued").withField("cursor").write(w, r)
		return
	}
	var types []string
	for _, v := range r.URL.Query()["type"] {
		for _, t := range strings.Split(v, ",") {
			if !events.KnownType(t) {
				problem(CodeInvalidRequest, "type must be an event type: "+strings.Join(promotion.EventTypes, ", ")).withField("type").write(w, r)
				return
			}
			types = append(types, t)
		}
	}
	evs, err := s.cfg.Manager.Events(r.Context(), after, types, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.EventPage{Events: make([]api.Event, 0, len(evs)), NextCursor: eventCursor(after)}
	for _, e := range evs {
		out.Events = append(out.Events, events.FromStore(e))
	}
	if len(evs) > 0 {
		out.NextCursor = eventCursor(evs[len(evs)-1].Seq)
	}
	writeJSON(w, http.StatusOK, out)
}
