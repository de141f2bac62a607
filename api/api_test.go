package api_test

import (
	"encoding/json"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/api"
)

// TestLeaf: the package imports the standard library only, so the client
// takes nothing of the server with it.
func TestLeaf(t *testing.T) {
	t.Parallel()
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("api imports %s: it must import the standard library only", imp)
		}
	}
}

// TestEveryFieldNamed: every field of every shape names its JSON member in
// a tag (but PageChange's, which encodes itself): a member's name is
// contract, never Go's field name by default.
func TestEveryFieldNamed(t *testing.T) {
	t.Parallel()
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name == "PageChange" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fd := range st.Fields.List {
				if fd.Tag == nil || !strings.Contains(fd.Tag.Value, `json:"`) {
					t.Errorf("%s: %s has no json tag", ts.Name.Name, fd.Names)
				}
			}
			return true
		})
	}
}

// TestTimesEncodeAsRFC3339: a time set in UTC encodes as RFC 3339 with the
// fraction of a second it has, trailing zeros left out: the text the
// server wrote as t.UTC().Format(time.RFC3339Nano).
func TestTimesEncodeAsRFC3339(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC-3:30", -(3*3600 + 1800))
	for _, at := range []time.Time{
		{},
		time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 21, 0, 0, 0, 120_000_000, zone),
		time.Date(2026, 11, 21, 23, 59, 59, 999_999_999, zone),
		time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Now(), // with a monotonic reading
	} {
		b, err := json.Marshal(api.DeadLetter{At: at.UTC()})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"claim_id":"","user_id":"","reason":"","deliveries":0,"at":"` + at.UTC().Format(time.RFC3339Nano) + `"}`
		if string(b) != want {
			t.Errorf("%v:\n got %s\nwant %s", at, b, want)
		}
		var back api.DeadLetter
		if err := json.Unmarshal(b, &back); err != nil || !back.At.Equal(at) {
			t.Errorf("%v read back as %v, %v", at, back.At, err)
		}
	}
}

// TestPageChange: a PageChange sends its new setting, or null to go back
// to the page's defaults; left out, the member is absent.
func TestPageChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		patch api.WaitingRoomPatch
		want  string
	}{
		{api.WaitingRoomPatch{}, `{}`},
		{api.WaitingRoomPatch{Page: &api.PageChange{}}, `{"page":null}`},
		{api.WaitingRoomPatch{Page: &api.PageChange{To: &api.QueuePage{Title: "Drop", Colors: api.QueuePageColors{Accent: "#0a7f5a"}}}},
			`{"page":{"title":"Drop","colors":{"accent":"#0a7f5a"}}}`},
	} {
		b, err := json.Marshal(tc.patch)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v encodes as %s, %v; want %s", tc.patch, b, err, tc.want)
		}
	}
}
