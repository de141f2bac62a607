package docs

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m) }

const module = "github.com/dibsio/dibs/"

// notDrawn are the packages the picture leaves out: test kits and packages
// that hold only tests or files that are not Go code.
var notDrawn = []string{"internal/testkit/", "faults", "bench/bundle", "store/storetest", "deploy", "docs"}

// TestLayersPicture holds the picture of docs/architecture.md ("Packages, by
// layer") against the code: every package of the module is in it (but
// those of notDrawn), and each imports only packages drawn before it, on a
// lower line or earlier on its own.
func TestLayersPicture(t *testing.T) {
	order := picture(t)
	imports := moduleImports(t)
	for pkg := range imports {
		if _, ok := order[pkg]; !ok && !skipped(pkg) {
			t.Errorf("package %s is not in architecture.md's picture of the layers", pkg)
		}
	}
	for pkg, pos := range order {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("architecture.md's picture draws %s, which is no package of the module", pkg)
		}
		for _, imp := range imports[pkg] {
			if skipped(imp) {
				t.Errorf("%s imports %s, a package the picture leaves out as test-only", pkg, imp)
				continue
			}
			if at, ok := order[imp]; ok && at >= pos {
				t.Errorf("%s imports %s, which the picture draws above it or after it on its line", pkg, imp)
			}
		}
	}
}

func skipped(pkg string) bool {
	for _, p := range notDrawn {
		if pkg == p || strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p) {
			return true
		}
	}
	return false
}

// picture reads the packages of the layers picture, bottom line first and
// each line from the left: the position of each package in that order.
func picture(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "## Packages, by layer")
	if i < 0 {
		t.Fatal(`architecture.md has no section "## Packages, by layer"`)
	}
	text = text[i:]
	start := strings.Index(text, "```\n")
	end := strings.Index(text[start+4:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the layers section of architecture.md has no picture")
	}
	var lines [][]string
	sc := bufio.NewScanner(strings.NewReader(text[start+4 : start+4+end]))
	for sc.Scan() {
		var pkgs []string
		// The layer's name is the words before the first package: a
		// package is a word of lower-case letters and slashes that the
		// module has.
		for _, f := range strings.Fields(sc.Text()) {
			if isPackageWord(f) {
				pkgs = append(pkgs, f)
			}
		}
		lines = append(lines, pkgs)
	}
	order := make(map[string]int)
	n := 0
	for i := len(lines) - 1; i >= 0; i-- {
		for _, p := range lines[i] {
			order[p] = n
			n++
		}
	}
	if len(order) == 0 {
		t.Fatal("no package read from architecture.md's picture")
	}
	return order
}

// isPackageWord reports whether f names a folder of the module with Go
// code in it.
func isPackageWord(f string) bool {
	for _, r := range f {
		if (r < 'a' || r > 'z') && r != '/' {
			return false
		}
	}
	m, _ := filepath.Glob(filepath.Join("..", filepath.FromSlash(f), "*.go"))
	return len(m) > 0
}

// moduleImports reads the non-test Go files of the module: each package
// (a path relative to the module) and the packages of the module it
// imports.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := make(map[string][]string)
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == ".." {
				return nil
			}
			if name := d.Name(); strings.HasPrefix(name, ".") || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel("..", filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, is := range f.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(p, module) {
				out[pkg] = append(out[pkg], strings.TrimPrefix(p, module))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
