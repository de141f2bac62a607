// Package bundle holds the test of the benchmark bundle that
// `make bench-bundle` builds (scripts/bench-bundle-build.sh): it builds the
// tarball, unpacks it and runs its script, scripts/bench-bundle.sh, in its
// seconds-long smoke mode, so the bundle cannot rot between the runs on big
// machines. It has no code of its own.
package bundle
