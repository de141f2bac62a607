package demo

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"sync"
)

// serverLog collects the local server's output: it keeps the last lines for
// error messages, forwards everything to an optional writer, and announces
// the address from the first `listening addr=` line. Written by the exec
// package's copying goroutines, read by the caller, so guarded by mu.
type serverLog struct {
	mu      sync.Mutex
	forward io.Writer
	partial []byte
	lines   []string // the last logTailLines complete lines
	found   bool
	// addr receives the listening address once; buffered so Write never
	// blocks on it.
	addr chan string
}

func newServerLog(forward io.Writer) *serverLog {
	return &serverLog{forward: forward, addr: make(chan string, 1)}
}

// Write implements io.Writer; it never fails, so the server is never
// blocked or broken by its log.
func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.forward != nil {
		_, _ = l.forward.Write(p)
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.addLine(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	// A line without end must not grow without bound.
	if len(l.partial) > 64<<10 {
		l.addLine(string(l.partial))
		l.partial = nil
	}
	return len(p), nil
}

func (l *serverLog) addLine(line string) {
	line = strings.TrimRight(line, "\r")
	if len(l.lines) == logTailLines {
		copy(l.lines, l.lines[1:])
		l.lines = l.lines[:logTailLines-1]
	}
	l.lines = append(l.lines, line)
	if !l.found {
		if addr, ok := ListeningAddr(line); ok {
			l.found = true
			l.addr <- addr
		}
	}
}

// tailText is the last lines of the log, indented, for error messages.
func (l *serverLog) tailText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if len(l.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(l.partial))
	}
	if len(lines) == 0 {
		return "    (the server wrote nothing)"
	}
	return "    " + strings.Join(lines, "\n    ")
}

var (
	// listeningMsg matches the message "listening" in slog's text
	// (msg=listening, msg="listening") and JSON ("msg":"listening") forms.
	listeningMsg = regexp.MustCompile(`(?:^|\s)msg="?listening"?(?:\s|$)|"msg":\s*"listening"`)
	textAddr     = regexp.MustCompile(`(?:^|\s)addr="?([^\s"]+)"?`)
	jsonAddr     = regexp.MustCompile(`"addr":\s*"([^"]+)"`)
)

// ListeningAddr returns the address of a `listening addr=HOST:PORT` log
// line, in slog's text or JSON form.
func ListeningAddr(line string) (string, bool) {
	if !listeningMsg.MatchString(line) {
		return "", false
	}
	for _, re := range []*regexp.Regexp{jsonAddr, textAddr} {
		if m := re.FindStringSubmatch(line); m != nil {
			return m[1], true
		}
	}
	return "", false
}
