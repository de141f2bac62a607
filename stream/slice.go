package stream

// Slicing: Redis runs one command at a time, and every claim waits behind
// whatever command runs. So the runtime's own commands (reads, acks,
// reclaim, trims, failure-count reads) each carry a bounded number of ids or
// fields and look at a bounded number of entries: bigger work is cut into
// slices, sent as several commands (pipelined where they are independent),
// so the claims run between them. The functions below decide the slices;
// they do no I/O.

const (
	// callSlice bounds the ids or fields one command carries (XACK, HMGET,
	// HDEL, XCLAIM), the entries one XREADGROUP asks for, and the pending
	// entries one reclaim slice looks at.
	callSlice = 100
	// reclaimTake bounds the entries one reclaim slice takes over: XCLAIM
	// walks each entry's stream node to find it, and the script carries the
	// entries back, a few microseconds each: 25 cost Redis about 0.25 ms,
	// 50 about 0.5 ms.
	reclaimTake = 25
	// reclaimSlices bounds the reclaim slices of one reclaim pass: a pass
	// looks at up to reclaimSlices*callSlice pending entries and takes over
	// up to reclaimSlices*reclaimTake, and the next pass goes on from where
	// it stopped.
	reclaimSlices = 64
	// trimSlice is the LIMIT of one XTRIM: the most entries one trim
	// removes. Redis trims whole stream nodes (about 100 entries, or 4 kB),
	// so one trim frees at most a few hundred nodes.
	trimSlice = 5000
	// trimSlices bounds the trims of one reclaim pass: with the default
	// reclaim interval of 5s, a pass keeps up with 64 trims of 5,000
	// entries, 64,000 acknowledged entries a second.
	trimSlices = 64
)

// chunks splits s into consecutive pieces of at most n elements (n at least
// 1), in order; an empty s gives none. The pieces share s's backing array.
func chunks[T any](s []T, n int) [][]T {
	n = max(n, 1)
	out := make([][]T, 0, (len(s)+n-1)/n)
	for len(s) > 0 {
		k := min(len(s), n)
		out = append(out, s[:k:k])
		s = s[k:]
	}
	return out
}

// readCount returns how many entries the next XREADGROUP of a batch of up to
// want entries asks for, got of them read already: the rest of the batch,
// at most callSlice; 0 once the batch is full.
func readCount(want, got int) int {
	return max(min(want-got, callSlice), 0)
}

// reclaimStart is where a reclaim scan starts over: the oldest pending
// entry.
const reclaimStart = "-"

// advance moves the reclaim scan's cursor past a slice that looked at
// scanned pending entries (count asked for), the last of them last, and
// took over taken entries (take at most). A slice that looked at fewer than
// count without reaching take reached the end of the range worth looking
// at (the entries old enough to be idle): the scan is done, and the next
// one starts over at the oldest pending entry. Otherwise (the slice was cut
// short by count or by take) the scan goes on after last (an exclusive
// start).
func advance(last string, scanned, count, taken, take int) (next string, done bool) {
	if last == "" || (scanned < count && taken < take) {
		return reclaimStart, true
	}
	return "(" + last, false
}
