// Package benchcpu tells a benchmark where its CPU time went: how much this
// process used (the benchmark's clients included) and how much the Redis
// server used, per claim. It reads the process's own time from
// /proc/self/stat and Redis's from INFO cpu; where either cannot be read (no
// /proc, or a Cluster where INFO would reach any one node) that figure is
// left out rather than reported wrong.
package benchcpu
