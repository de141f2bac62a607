package httpapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/api"
)

// jsonMember is a member of the JSON object a struct type encodes.
type jsonMember struct {
	Name string
	// OmitEmpty: the member is left out when empty (omitempty, omitzero).
	OmitEmpty bool
	Type      reflect.Type
}

// jsonMembers are the members of the JSON object struct type t encodes, in
// its fields' order.
func jsonMembers(t reflect.Type) []jsonMember {
	var ms []jsonMember
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if f.Anonymous {
			panic(t.String() + " embeds " + f.Name + ": spell its members out")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		o := strings.Split(opts, ",")
		ms = append(ms, jsonMember{Name: name, OmitEmpty: slices.Contains(o, "omitempty") || slices.Contains(o, "omitzero"), Type: f.Type})
	}
	return ms
}

// wireKind is what a member of type t takes in JSON, in decode's words
// (jsonKind); a time is a string, raw JSON "anything".
func wireKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[time.Time]():
		return "a string"
	case reflect.TypeFor[json.RawMessage]():
		return "anything"
	}
	return jsonKind(t)
}

// TestInputsMatchTheirShapes: the bodies the server decodes into structs of
// its own (to tell an absent member from a zero one) take the members of
// their api shape, what a client writes, and no others, each of the same
// JSON kind: a member added to one side only fails here.
func TestInputsMatchTheirShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ server, shape reflect.Type }{
		{reflect.TypeFor[promotionIn](), reflect.TypeFor[api.NewPromotion]()},
		{reflect.TypeFor[waitingRoomIn](), reflect.TypeFor[api.WaitingRoomSettings]()},
		{reflect.TypeFor[patchIn](), reflect.TypeFor[api.PromotionPatch]()},
		{reflect.TypeFor[roomPatchIn](), reflect.TypeFor[api.WaitingRoomPatch]()},
	} {
		kinds := map[string]string{}
		for _, m := range jsonMembers(tc.shape) {
			kinds[m.Name] = wireKind(m.Type)
		}
		for _, m := range jsonMembers(tc.server) {
			kind, ok := kinds[m.Name]
			switch {
			case !ok:
				t.Errorf("%v decodes %q, which %v lacks", tc.server, m.Name, tc.shape)
			case kind != wireKind(m.Type):
				t.Errorf("%q: %v decodes %s, %v writes %s", m.Name, tc.server, wireKind(m.Type), tc.shape, kind)
			}
			delete(kinds, m.Name)
		}
		for name := range kinds {
			t.Errorf("%v writes %q, which %v does not decode", tc.shape, name, tc.server)
		}
	}
}
