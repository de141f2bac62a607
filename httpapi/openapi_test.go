package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dibsio/dibs/httpapi"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite httpapi/openapi.json from its Go description (openapi_gen_test.go)")

// openAPIFile is the document's file, relative to the package.
const openAPIFile = "openapi.json"

// generatedOpenAPI is the document as its Go description gives it.
// A schema that does not match its Go type (shapeOf, inputOf) fails the
// test.
func generatedOpenAPI(t *testing.T) []byte {
	t.Helper()
	defer func() {
		if e := recover(); e != nil {
			if se, ok := e.(shapeError); ok {
				t.Fatal(se)
			}
			panic(e)
		}
	}()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(openAPIDocument()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// loadOpenAPI loads the embedded document with kin-openapi.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		t.Fatalf("load %s: %v", openAPIFile, err)
	}
	return doc
}

// TestOpenAPIFile: the file is what its Go description generates (with
// -update, it is rewritten), and the binary embeds that file.
func TestOpenAPIFile(t *testing.T) {
	want := generatedOpenAPI(t)
	if *updateOpenAPI {
		if err := os.WriteFile(openAPIFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes); rebuild to embed it", openAPIFile, len(want))
		return
	}
	got, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what openapi_gen_test.go generates: edit the Go description, then run\n"+
			"\tgo test ./httpapi -run TestOpenAPIFile -update", openAPIFile)
	}
	if !bytes.Equal(httpapi.OpenAPI(), got) {
		t.Fatalf("the embedded document differs from %s", openAPIFile)
	}
}

// TestOpenAPIValid validates the document with kin-openapi: its structure
// as OpenAPI 3.1 (info, paths, operations, parameters, responses, security
// schemes), every $ref resolving, and every schema as JSON Schema 2020-12.
func TestOpenAPIValid(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi is %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableMultiError(), openapi3.EnableSchemaDefaultsValidation(),
		openapi3.EnableSchemaPatternValidation(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3.1: %v", err)
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if prev, ok := ids[op.OperationID]; ok {
				t.Errorf("operationId %q of %s %s is taken by %s", op.OperationID, method, path, prev)
			}
			ids[op.OperationID] = method + " " + path
			if op.Security == nil {
				t.Errorf("%s %s states no security: name its schemes, or [{}] for none", method, path)
			}
		}
	}
}

// documented is the document's operations as mux patterns ("GET /v1/…").
func documented(doc *openapi3.T) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}

// problemCodesOf returns the x-problem-codes of a response.
func problemCodesOf(t *testing.T, where string, r *openapi3.Response) []string {
	t.Helper()
	raw, ok := r.Extensions["x-problem-codes"]
	if !ok {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		t.Fatalf("%s: x-problem-codes is %T, want a list", where, raw)
	}
	var codes []string
	for _, c := range list {
		s, ok := c.(string)
		if !ok {
			t.Fatalf("%s: x-problem-codes holds %v, want strings", where, c)
		}
		codes = append(codes, s)
	}
	return codes
}

// TestOpenAPIRoutes compares the routes the Server registers with the
// document's paths and methods, both ways.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, backend{"single", "sqlite"})
	doc := loadOpenAPI(t)
	ops := documented(doc)
	routes := httpapi.Routes(e.api)
	for _, r := range routes {
		if _, ok := ops[r]; !ok {
			t.Errorf("the server serves %s, which openapi.json does not document: add its operation to paths() in openapi_gen_test.go, then go test ./httpapi -run TestOpenAPIFile -update", r)
		}
	}
	for p := range ops {
		if !slices.Contains(routes, p) {
			t.Errorf("openapi.json documents %s, which the server does not serve", p)
		}
	}
}

// TestOpenAPICodes checks the problem codes both ways: the document's table
// (x-problem-codes at its root) is problem.go's, the Problem schema's enum
// holds them all, each problem answer lists codes whose status is the
// answer's, and every code is answered somewhere.
func TestOpenAPICodes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	statuses := httpapi.CodeStatuses()

	var root map[string]struct {
		Status []int  `json:"status"`
		When   string `json:"when"`
	}
	raw, _ := json.Marshal(doc.Extensions["x-problem-codes"])
	if err := json.Unmarshal(raw, &root); err != nil || len(root) == 0 {
		t.Fatalf("the document's x-problem-codes table is missing or malformed: %v", err)
	}
	for code, st := range statuses {
		row, ok := root[code]
		switch {
		case !ok:
			t.Errorf("problem code %s (%d) of problem.go is not in the document's x-problem-codes", code, st)
		case len(row.Status) == 0 || row.Status[0] != st:
			t.Errorf("problem code %s: the document gives status %v, problem.go %d", code, row.Status, st)
		}
	}
	for code, row := range root {
		if _, ok := statuses[code]; !ok {
			t.Errorf("the document's x-problem-codes lists %s, which problem.go does not have", code)
		}
		for _, st := range row.Status[min(1, len(row.Status)):] {
			// The one other status: the edge's rate limit.
			if code != httpapi.CodeOverloaded || st != http.StatusTooManyRequests {
				t.Errorf("problem code %s: the document gives it status %d too, which nothing answers", code, st)
			}
		}
	}
	enum := doc.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum
	var inEnum []string
	for _, v := range enum {
		inEnum = append(inEnum, v.(string))
	}
	sort.Strings(inEnum)
	if want := slices.Sorted(maps.Keys(statuses)); !slices.Equal(inEnum, want) {
		t.Errorf("the Problem schema's code enum is %v, want problem.go's %v", inEnum, want)
	}

	used := map[string]bool{}
	check := func(where, status string, r *openapi3.Response) {
		codes := problemCodesOf(t, where, r)
		isProblem := r.Content.Get("application/problem+json") != nil
		switch {
		case isProblem && len(codes) == 0:
			t.Errorf("%s: a problem answer without x-problem-codes", where)
		case !isProblem && len(codes) > 0:
			t.Errorf("%s: x-problem-codes on an answer that is not application/problem+json", where)
		}
		for _, c := range codes {
			used[c] = true
			row, ok := root[c]
			if !ok {
				t.Errorf("%s lists problem code %s, which problem.go does not have", where, c)
				continue
			}
			if !slices.Contains(row.Status, atoi(t, status)) {
				t.Errorf("%s lists problem code %s, whose status is %v", where, c, row.Status)
			}
		}
	}
	for pattern, op := range documented(doc) {
		for status, r := range op.Responses.Map() {
			check(pattern+" "+status, status, r.Value)
		}
	}
	for name, r := range doc.Components.Responses {
		for _, st := range problemStatuses(t, r.Value) {
			check("components.responses."+name, st, r.Value)
		}
	}
	for code := range statuses {
		if !used[code] {
			t.Errorf("problem code %s is answered by no operation of the document", code)
		}
	}
}

// problemStatuses gives a shared response's status: the status of its
// codes.
func problemStatuses(t *testing.T, r *openapi3.Response) []string {
	t.Helper()
	codes := problemCodesOf(t, "a component response", r)
	if len(codes) == 0 {
		return nil
	}
	return []string{strconv.Itoa(httpapi.CodeStatuses()[codes[0]])}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("response status %q is not a number", s)
	}
	return n
}

// TestOpenAPIServed: GET /openapi.json serves the file's bytes, without a
// token, cacheable, and 304 for its ETag.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := setup(t, backend{"single", "sqlite"})
	file, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(e.url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Equal(body, file) {
		t.Fatalf("GET /openapi.json: %d, %d bytes; want 200 with the %d bytes of %s", res.StatusCode, len(body), len(file), openAPIFile)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=") {
		t.Errorf("Cache-Control %q, want it cacheable", cc)
	}
	etag := res.Header.Get("ETag")
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/openapi.json", nil)
		req.Header.Set("If-None-Match", inm)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotModified || n != 0 {
			t.Errorf("If-None-Match %s: %d with %d bytes, want 304 and none", inm, res.StatusCode, n)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/openapi.json", nil)
	req.Header.Set("If-None-Match", `"stale"`)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("a stale ETag: %v %v, want 200", res, err)
	} else {
		res.Body.Close()
	}
}

// TestOpenAPIAnswers sends every documented operation requests a client
// gets right and wrong (no token, an unknown or malformed id, an empty,
// broken or foreign body) with and without the admin token, against an
// unknown promotion and existing ones of each mode, and checks that each
// answer's status and problem code are listed for that operation and that
// its JSON body is what the answer's schema allows.
func TestOpenAPIAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t, backend{"single", "sqlite"})
	doc := loadOpenAPI(t)
	e.create(t, `{"id": "probe", "stock": 5}`)
	e.create(t, `{"id": "room", "stock": 5, "waiting_room": {"enabled": true}}`)
	e.create(t, `{"id": "gift", "mode": "grant"}`)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ids := map[string][]string{
		"{id}":      {"probe", "room", "gift", "nope", "-bad"},
		"{user_id}": {"u1", "-bad"},
		"{name}":    {"nobody", "default", "-bad"},
	}
	ops := documented(doc)
	requests, answers := 0, map[string]bool{}
	defer func() { t.Logf("%d requests, %d distinct answers (operation, status, code)", requests, len(answers)) }()
	// In a fixed order: the probes change things (close the promotion).
	for _, pattern := range slices.Sorted(maps.Keys(ops)) {
		op := ops[pattern]
		method, path, _ := strings.Cut(pattern, " ")
		for _, p := range expand(path, ids) {
			for _, auth := range []string{"", "Bearer " + token} {
				for _, body := range []string{"{}", `{"user_id": "u1"}`, "not json", ""} {
					if body != "" && (method == http.MethodGet || method == http.MethodDelete) {
						continue
					}
					req, err := http.NewRequest(method, e.url+p, strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "application/json")
					if auth != "" {
						req.Header.Set("Authorization", auth)
					}
					res, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					raw, _ := io.ReadAll(res.Body)
					res.Body.Close()
					requests++
					var pr struct{ Code string }
					_ = json.Unmarshal(raw, &pr)
					answers[fmt.Sprint(pattern, " ", res.StatusCode, " ", pr.Code)] = true
					what := fmt.Sprintf("%s %s (token %t, body %q) answered %d", method, p, auth != "", body, res.StatusCode)
					r := op.Responses.Status(res.StatusCode)
					if r == nil {
						t.Errorf("%s, a status openapi.json does not list for %s: %s", what, pattern, raw)
						continue
					}
					checkBody(t, what, r.Value, res.Header.Get("Content-Type"), raw)
					if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
						continue
					}
					if pr.Code == "" {
						t.Errorf("%s with a problem without a code: %s", what, raw)
						continue
					}
					if !slices.Contains(problemCodesOf(t, pattern, r.Value), pr.Code) {
						t.Errorf("%s %s, a problem code openapi.json does not list for %s %d", what, pr.Code, pattern, res.StatusCode)
					}
				}
			}
		}
	}
}

// checkBody checks a JSON answer against its schema in the document
// (JSON Schema 2020-12).
func checkBody(t *testing.T, what string, r *openapi3.Response, contentType string, raw []byte) {
	t.Helper()
	mt, _, _ := strings.Cut(contentType, ";")
	if mt != "application/json" && mt != "application/problem+json" {
		return
	}
	media := r.Content.Get(mt)
	if media == nil || media.Schema == nil {
		t.Errorf("%s as %s, a type openapi.json does not list for that answer", what, mt)
		return
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("%s with malformed JSON: %v", what, err)
		return
	}
	if err := media.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
		t.Errorf("%s with a body its schema rejects: %v\n%s", what, err, raw)
	}
}

// expand fills in a path's parameters with each of their probe values.
func expand(path string, values map[string][]string) []string {
	out := []string{path}
	for param, vals := range values {
		var next []string
		for _, p := range out {
			if !strings.Contains(p, param) {
				next = append(next, p)
				continue
			}
			for _, v := range vals {
				next = append(next, strings.ReplaceAll(p, param, v))
			}
		}
		out = next
	}
	return out
}
