package edge

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dibsio/dibs/claim"
)

// TestImportsNoDomain keeps the edge a plain HTTP middleware: of dibs, it
// imports only the identifier rule (package ident, which imports nothing),
// so wrapping a handler does not pull in the claim path, the stream
// runtime or a store.
func TestImportsNoDomain(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/dibsio/dibs/") && path != "github.com/dibsio/dibs/ident" {
				t.Errorf("%s imports %s; the edge may import only github.com/dibsio/dibs/ident of dibs", name, path)
			}
		}
	}
}

// TestDefaultKeyPrefixIsTheClaimPrefix keeps a promotion's limiter buckets
// under the same prefix as its claim keys.
func TestDefaultKeyPrefixIsTheClaimPrefix(t *testing.T) {
	t.Parallel()
	if DefaultKeyPrefix != claim.DefaultPrefix {
		t.Fatalf("DefaultKeyPrefix = %q, claim.DefaultPrefix = %q", DefaultKeyPrefix, claim.DefaultPrefix)
	}
}
