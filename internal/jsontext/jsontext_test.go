package jsontext

import (
	"encoding/json"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// FuzzAppendString holds AppendString to encoding/json, byte for byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "u1", `a"b`, `\`, "<&>", "é", "\x00\x1f", "\u2028", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, want x%s", s, got, want)
		}
	})
}
