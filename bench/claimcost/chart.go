package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"strconv"
	"strings"
)

// bar is one row of a chart.
type bar struct {
	label string
	value float64
}

// chart reads "label<TAB>value" rows (and an optional first line
// "# title<TAB>unit") from in and writes a horizontal bar chart to -out.
func chart(args []string, in io.Reader) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	out := fs.String("out", "", "SVG file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("chart needs -out")
	}
	title, unit, bars, err := readBars(in)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, []byte(renderSVG(title, unit, bars)), 0o644)
}

func readBars(in io.Reader) (title, unit string, bars []bar, err error) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if h, ok := strings.CutPrefix(line, "#"); ok {
			title, unit, _ = strings.Cut(strings.TrimSpace(h), "\t")
			continue
		}
		label, v, ok := strings.Cut(line, "\t")
		if !ok {
			return "", "", nil, fmt.Errorf("chart row %q: want label<TAB>value", line)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue // a figure that was not measured ("-") gets no bar
		}
		bars = append(bars, bar{label: label, value: f})
	}
	return title, unit, bars, sc.Err()
}

// renderSVG draws the bars scaled to the largest, labels on the left and
// values at the end of each bar.
func renderSVG(title, unit string, bars []bar) string {
	const (
		labelW, barW, rowH, top, pad = 330, 360, 26, 40, 10
	)
	width := labelW + barW + 110
	height := top + rowH*len(bars) + pad
	top1 := 0.0
	for _, b := range bars {
		top1 = max(top1, b.value)
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&s, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", pad, html.EscapeString(title))
	for i, b := range bars {
		y := top + i*rowH
		w := 0.0
		if top1 > 0 {
			w = b.value / top1 * barW
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, y+16, html.EscapeString(b.label))
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#4a7ab5"/>`+"\n", labelW, y+4, w, rowH-8)
		fmt.Fprintf(&s, `<text x="%.1f" y="%d">%s %s</text>`+"\n", float64(labelW)+w+6, y+16, strconv.FormatFloat(b.value, 'f', 1, 64), html.EscapeString(unit))
	}
	s.WriteString("</svg>\n")
	return s.String()
}
