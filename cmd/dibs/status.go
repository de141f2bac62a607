package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dibsio/dibs/client"
)

// statusFrame is one refresh of dibs status, also its --json form.
type statusFrame struct {
	At        time.Time         `json:"at"`
	Promotion *client.Promotion `json:"promotion"`
	// ClaimsPerSecond and IssuedPerSecond are measured between this frame
	// and the one before; null on the first frame.
	ClaimsPerSecond *float64 `json:"claims_per_second"`
	IssuedPerSecond *float64 `json:"issued_per_second"`
	// Progress is 0..1: the share of the stock taken (first_come), or of
	// the targets issued (grant).
	Progress float64 `json:"progress"`
}

// barWidth is the progress bar's width in characters.
const barWidth = 40

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newOpsFlagSet("status", " PROMOTION", "a live view of a promotion: counts, rates, progress to sold out", stderr,
		"Reads the promotion every --interval and redraws: its state, counts, claims/s and",
		"issued/s since the last frame, and a progress bar to sold out (for a grant",
		"promotion: to every target issued). Runs until Ctrl-C; --once prints one frame.",
		"With --json each frame is one JSON object on a line of its own (--once: one",
		"document); the rates are null on the first frame.")
	once := fs.Bool("once", false, "print one frame and exit")
	interval := fs.Duration("interval", time.Second, "time between frames (at least 100ms)")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *interval < 100*time.Millisecond {
		return usageErrorf("--interval must be at least 100ms")
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	id := pos[0]
	clear := !sf.json && !*once && isTerminal(stdout)
	// The next read starts an interval after the last frame, however long
	// a read took: frames never bunch up behind a slow server.
	next := time.NewTimer(*interval)
	defer next.Stop()
	var prev *statusFrame
	for {
		p, err := c.GetPromotion(ctx, id)
		switch {
		case ctx.Err() != nil:
			return nil // Ctrl-C
		case err != nil && prev == nil:
			return err // the first read decides: a wrong id or server fails at once
		case err != nil:
			// Keep watching through a blip; say what the last read met.
			fmt.Fprintf(stderr, "dibs status: %s\n", oneLine(err.Error()))
		default:
			f := newFrame(time.Now(), p, prev)
			if err := writeFrame(stdout, f, sf.json, *once, clear); err != nil {
				return err
			}
			prev = &f
		}
		if *once {
			return nil
		}
		next.Reset(*interval)
		select {
		case <-ctx.Done():
			return nil
		case <-next.C:
		}
	}
}

// newFrame makes the frame of p read at now, its rates measured since prev
// (nil: none).
func newFrame(now time.Time, p *client.Promotion, prev *statusFrame) statusFrame {
	f := statusFrame{At: now.UTC(), Promotion: p}
	switch {
	case p.Mode == client.ModeGrant && p.Counts.Accepted > 0:
		f.Progress = float64(p.Counts.Issued) / float64(p.Counts.Accepted)
	case p.Mode != client.ModeGrant && p.Stock > 0:
		f.Progress = float64(p.Counts.Accepted) / float64(p.Stock)
	}
	f.Progress = min(max(f.Progress, 0), 1)
	if prev != nil {
		if dt := now.Sub(prev.At).Seconds(); dt > 0 {
			claims := float64(p.Counts.Accepted-prev.Promotion.Counts.Accepted) / dt
			issued := float64(p.Counts.Issued-prev.Promotion.Counts.Issued) / dt
			f.ClaimsPerSecond, f.IssuedPerSecond = &claims, &issued
		}
	}
	return f
}

func writeFrame(w io.Writer, f statusFrame, asJSON, once, clear bool) error {
	if asJSON {
		if once {
			return writeJSON(w, f)
		}
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var b strings.Builder
	if clear {
		b.WriteString("\x1b[H\x1b[2J") // home, clear screen
	}
	renderFrame(&b, f)
	if !clear && !once {
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// renderFrame writes the human form of f.
func renderFrame(b *strings.Builder, f statusFrame) {
	p := f.Promotion
	title := p.ID
	if p.Name != "" {
		title += " (" + p.Name + ")"
	}
	fmt.Fprintf(b, "%s  %s  %s\n", title, stateOf(*p), f.At.Format(time.RFC3339))
	filled := int(f.Progress*barWidth + 0.5)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", barWidth-filled)
	if p.Mode == client.ModeGrant {
		fmt.Fprintf(b, "[%s] %5.1f%%  %d of %d targets issued\n", bar, f.Progress*100, p.Counts.Issued, p.Counts.Accepted)
	} else {
		fmt.Fprintf(b, "[%s] %5.1f%%  %d of %d taken\n", bar, f.Progress*100, p.Counts.Accepted, p.Stock)
	}
	fmt.Fprintf(b, "%s\n", countsLine(p.Counts))
	fmt.Fprintf(b, "claims/s %s  issued/s %s\n", rate(f.ClaimsPerSecond), rate(f.IssuedPerSecond))
	if r := p.WaitingRoom; r.Enabled {
		fmt.Fprintf(b, "waiting room: waiting %d, admitted %d, passes spent %d, abandoned %d\n",
			r.Waiting, r.Admitted, r.PassesSpent, r.Abandoned)
	}
}

func rate(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *r)
}

// isTerminal reports whether w is a character device (a terminal), where
// frames redraw in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
