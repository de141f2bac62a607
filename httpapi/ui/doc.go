// Package ui is the live dashboard of dibs serve, at /ui: its static page
// (HTML, CSS and hand-written JavaScript, embedded, no build step, nothing
// loaded from elsewhere) and the Hub that reads every promotion once a
// second and fans the snapshot out to every open dashboard.
//
// The HTTP side (login, the session cookie, the CSRF check and the event
// stream) lives in package httpapi, which mounts this package under /ui/.
package ui
