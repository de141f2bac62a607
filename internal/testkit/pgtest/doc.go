// Package pgtest runs real PostgreSQL servers for tests: one binary-wide
// server in which every test gets its own database ([URL]), and dedicated
// servers for tests that stop and restart the database ([Fresh]).
//
// initdb and postgres are taken from PATH, else from the highest version
// under /usr/lib/postgresql/*/bin. PostgreSQL refuses to run as root, so
// when the tests run as root the servers run as the postgres user (or
// nobody). Servers run with fsync off: they are for tests only.
//
// A test binary using URL runs its tests through Main (or redistest.Main,
// if it uses Redis too: both are testmain.Main), which stops the shared
// server after the tests; a server is also killed by the kernel if the test
// binary dies.
package pgtest
