package httpapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// openAPIDoc is the OpenAPI 3.1 document of the HTTP API, generated from
// its Go description (openapi_gen_test.go: go test ./httpapi -run
// TestOpenAPIFile -update) and checked against the routes the Server
// registers and the codes of problem.go (openapi_test.go).
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPIETag is the strong validator of openAPIDoc: it changes with
// every change of the document, so a cached copy is never stale for long.
var openAPIETag = func() string {
	sum := sha256.Sum256(openAPIDoc)
	return strconv.Quote(hex.EncodeToString(sum[:16]))
}()

// OpenAPIMaxAge is how long, in seconds, clients and caches may keep the
// document served at GET /openapi.json before checking its ETag again.
const OpenAPIMaxAge = 300

// OpenAPI returns the OpenAPI 3.1 document (JSON) of the HTTP API, the
// bytes GET /openapi.json serves: the machine-readable form of
// docs/contract.md. The caller owns the returned slice.
func OpenAPI() []byte { return bytes.Clone(openAPIDoc) }

// serveOpenAPI answers GET /openapi.json: the document, without a token,
// cacheable for OpenAPIMaxAge seconds, and 304 to a request whose
// If-None-Match names its ETag.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(OpenAPIMaxAge))
	h.Set("ETag", openAPIETag)
	if etagMatches(r.Header.Get("If-None-Match"), openAPIETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(openAPIDoc)
	}
}

// etagMatches reports whether an If-None-Match header value names etag
// (weakly compared, RFC 9110 13.1.2) or is "*".
func etagMatches(header, etag string) bool {
	for v := range strings.SplitSeq(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == etag {
			return true
		}
	}
	return false
}
