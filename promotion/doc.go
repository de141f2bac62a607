// Package promotion runs promotions: it validates and creates them, keeps
// their Redis gate state in step with the database, starts and stops the
// confirmation pool of each promotion on the stream runtime, and issues
// accepted claims into the database exactly once.
//
// A [Manager] is the one entry point the HTTP API (or an embedding program)
// needs. On Start it finds the promotions that are not drained from the
// database — never by scanning Redis — and resumes confirmation of each one,
// including entries a killed process left pending. A re-check every second
// starts the pool of any promotion that has work (claims accepted on another
// instance, say) and marks ended promotions drained once every accepted
// claim is issued or dead-lettered.
package promotion
