package demo

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m) }

func TestListeningAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		addr string
	}{
		{`time=2026-01-02T03:04:05.000Z level=INFO msg=listening addr=127.0.0.1:41234`, "127.0.0.1:41234"},
		{`time=2026-01-02T03:04:05.000Z level=INFO msg=listening addr=127.0.0.1:41234 admin_token=x`, "127.0.0.1:41234"},
		{`level=INFO msg="listening" addr="[::1]:8080"`, "[::1]:8080"},
		{`{"time":"2026-01-02T03:04:05Z","level":"INFO","msg":"listening","addr":"127.0.0.1:5000"}`, "127.0.0.1:5000"},
		{`level=INFO msg="redis-server listening" addr=127.0.0.1:6379`, ""},
		{`level=INFO msg=listening-soon addr=127.0.0.1:1`, ""},
		{`level=INFO msg=started redis_addr=127.0.0.1:6379`, ""},
		{`level=INFO msg=listening`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		addr, ok := ListeningAddr(tt.line)
		if addr != tt.addr || ok != (tt.addr != "") {
			t.Errorf("ListeningAddr(%q) = %q, %v; want %q", tt.line, addr, ok, tt.addr)
		}
	}
}

func TestServerLog(t *testing.T) {
	t.Parallel()
	var forwarded bytes.Buffer
	l := newServerLog(&forwarded)
	if got := l.tailText(); got != "    (the server wrote nothing)" {
		t.Fatalf("empty tail: %q", got)
	}
	// Lines arrive split across writes, as they do from a pipe.
	input := "level=INFO msg=starting\nlevel=INFO msg=list"
	input2 := "ening addr=127.0.0.1:9\nlevel=INFO msg=listening addr=127.0.0.1:10\npartial"
	for _, s := range []string{input, input2} {
		if n, err := l.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	select {
	case addr := <-l.addr:
		if addr != "127.0.0.1:9" {
			t.Fatalf("address %q, want the first one", addr)
		}
	default:
		t.Fatal("no address announced")
	}
	select {
	case addr := <-l.addr:
		t.Fatalf("a second address was announced: %q", addr)
	default:
	}
	if forwarded.String() != input+input2 {
		t.Fatalf("forwarded %q", forwarded.String())
	}
	want := "    level=INFO msg=starting\n    level=INFO msg=listening addr=127.0.0.1:9\n    level=INFO msg=listening addr=127.0.0.1:10\n    partial"
	if got := l.tailText(); got != want {
		t.Fatalf("tail:\n%s\nwant:\n%s", got, want)
	}

	// Only the last lines are kept.
	for i := range 100 {
		fmt.Fprintf(l, "line %d\n", i)
	}
	tail := l.tailText()
	if n := strings.Count(tail, "\n") + 1; n != logTailLines {
		t.Fatalf("tail has %d lines, want %d", n, logTailLines)
	}
	if !strings.HasSuffix(tail, "    line 99") || strings.Contains(tail, "line 69\n") {
		t.Fatalf("tail is not the last lines:\n%s", tail)
	}
}
