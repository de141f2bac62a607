package claim

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptsCarryVersion: every script's source starts with its name and
// version, names are unique, and every script of the package is made by
// newScript or newReadOnlyScript (so none escapes this check).
func TestScriptsCarryVersion(t *testing.T) {
	t.Parallel()
	header := regexp.MustCompile(`^-- dibs:([a-z_]+) v([1-9][0-9]*)\n`)
	names := map[string]bool{}
	for _, src := range scriptSources {
		m := header.FindStringSubmatch(src)
		if m == nil {
			first, _, _ := strings.Cut(src, "\n")
			t.Errorf("script without a version header; its first line is %q", first)
			continue
		}
		if names[m[1]] {
			t.Errorf("two scripts named %q", m[1])
		}
		names[m[1]] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if n := strings.Count(src, "rueidis.NewLuaScript"); f != "scripts.go" && n > 0 {
			t.Errorf("%s makes %d scripts without newScript", f, n)
		}
		made += strings.Count(src, "= newScript(") + strings.Count(src, "= newReadOnlyScript(")
	}
	if made != len(scriptSources) || made == 0 {
		t.Errorf("%d scripts declared, %d sources kept", made, len(scriptSources))
	}
}
