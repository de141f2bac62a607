package redistest

import "strconv"

// ForExample returns the address of the binary-wide single-node Redis (see
// Single) and a key prefix of its own, such as "ex3:", for code that has no
// testing.TB to fail: Example functions. The server starts on first use and
// Main stops it after the tests and examples ran.
func ForExample() (addr, prefix string, err error) {
	s, err := single()
	if err != nil {
		return "", "", err
	}
	return s.Addr(), "ex" + strconv.FormatUint(prefixSeq.Add(1), 10) + ":", nil
}
