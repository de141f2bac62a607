package httpapi

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestTypeErrorsSpeakJSON: a field of the wrong JSON type is refused with
// a message in JSON's words, never a Go type.
func TestTypeErrorsSpeakJSON(t *testing.T) {
	t.Parallel()
	type body struct {
		Stock   int64    `json:"stock"`
		Name    string   `json:"name"`
		Paused  *bool    `json:"paused"`
		Users   []string `json:"users"`
		Ratio   float64  `json:"ratio"`
		Options struct{} `json:"options"`
	}
	goType := regexp.MustCompile(`\b(int64|int|string|bool|float64|\[\]string|struct)\b`)
	for in, want := range map[string]string{
		`{"stock":"ten"}`:   "field stock must be a whole number, got a string",
		`{"stock":1.5}`:     "field stock must be a whole number, got a number",
		`{"name":5}`:        "field name must be a string, got a number",
		`{"paused":"yes"}`:  "field paused must be true or false, got a string",
		`{"users":"u1"}`:    "field users must be an array, got a string",
		`{"ratio":true}`:    "field ratio must be a number, got true or false",
		`{"options":[1]}`:   "field options must be an object, got an array",
		`{"stock":{"a":1}}`: "field stock must be a whole number, got an object",
	} {
		var v body
		r := httptest.NewRequest("POST", "/", strings.NewReader(in))
		p := decodeJSON(httptest.NewRecorder(), r, MaxBodyBytes, &v)
		if p == nil {
			t.Errorf("%s: accepted", in)
			continue
		}
		if p.Detail != want {
			t.Errorf("%s: %q, want %q", in, p.Detail, want)
		}
		if m := goType.FindString(p.Detail); m != "" && !strings.Contains(want, m) {
			t.Errorf("%s: %q names the Go type %s", in, p.Detail, m)
		}
	}
}
