package stream

import (
	"slices"
	"testing"
)

func TestChunks(t *testing.T) {
	ids := make([]int, 250)
	for i := range ids {
		ids[i] = i
	}
	cases := []struct {
		n, size int
		want    []int // lengths of the pieces
	}{
		{0, 100, nil},
		{1, 100, []int{1}},
		{100, 100, []int{100}},
		{101, 100, []int{100, 1}},
		{250, 100, []int{100, 100, 50}},
		{3, 0, []int{1, 1, 1}}, // a size under 1 counts as 1
	}
	for _, c := range cases {
		got := chunks(ids[:c.n], c.size)
		var lens []int
		var joined []int
		for _, part := range got {
			lens = append(lens, len(part))
			joined = append(joined, part...)
		}
		if !slices.Equal(lens, c.want) {
			t.Errorf("chunks(%d, %d) lengths = %v, want %v", c.n, c.size, lens, c.want)
		}
		if !slices.Equal(joined, ids[:c.n]) {
			t.Errorf("chunks(%d, %d) do not give back the input in order", c.n, c.size)
		}
	}
	// A piece never grows into the next one's elements.
	parts := chunks(ids[:5], 2)
	_ = append(parts[0], -1)
	if ids[2] != 2 {
		t.Fatal("appending to a piece overwrote the input")
	}
}

func TestReadCount(t *testing.T) {
	cases := []struct{ want, got, next int }{
		{10, 0, 10},
		{100, 0, 100},
		{250, 0, callSlice},
		{250, 100, callSlice},
		{250, 200, 50},
		{250, 250, 0},
		{5, 7, 0},
	}
	for _, c := range cases {
		if n := readCount(c.want, c.got); n != c.next {
			t.Errorf("readCount(%d, %d) = %d, want %d", c.want, c.got, n, c.next)
		}
	}
	// The reads of a batch add up to the batch, none over callSlice.
	for _, want := range []int{1, 99, 100, 101, 1000, 1234} {
		got, reads := 0, 0
		for n := readCount(want, 0); n > 0; n = readCount(want, got) {
			if n > callSlice {
				t.Fatalf("batch %d: a read of %d", want, n)
			}
			got += n
			reads++
		}
		if got != want || reads != (want+callSlice-1)/callSlice {
			t.Errorf("batch %d: %d entries in %d reads", want, got, reads)
		}
	}
}

func TestAdvance(t *testing.T) {
	const from = "1700000000000-5"
	cases := []struct {
		last                        string
		scanned, count, taken, take int
		next                        string
		done                        bool
	}{
		{"", 0, 100, 0, 50, reclaimStart, true},     // nothing old enough to be idle
		{from, 40, 100, 3, 50, reclaimStart, true},  // the range ended within the slice
		{from, 100, 100, 3, 50, "(" + from, false},  // cut by count: go on after its last
		{from, 60, 100, 50, 50, "(" + from, false},  // cut by take: go on after its last
		{from, 100, 100, 50, 50, "(" + from, false}, // cut by both
		{"", 100, 100, 0, 50, reclaimStart, true},   // no last id: start over
	}
	for _, c := range cases {
		next, done := advance(c.last, c.scanned, c.count, c.taken, c.take)
		if next != c.next || done != c.done {
			t.Errorf("advance(%q, %d, %d, %d, %d) = %q, %v; want %q, %v",
				c.last, c.scanned, c.count, c.taken, c.take, next, done, c.next, c.done)
		}
	}
}
