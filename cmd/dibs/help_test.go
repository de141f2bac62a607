package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// runHere runs the CLI in this process and returns its exit code and
// output.
func runHere(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelpOfEveryCommand: --help of every command exits 0, its first line
// says what the command does, and it shows every flag as --flag, the way the
// docs write them; values from the environment never show.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Setenv("DIBS_ADMIN_TOKEN", "env-secret-token")
	t.Setenv("DIBS_DATABASE_URL", "postgres://u:env-secret-pass@db/dibs")
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for _, c := range commands() {
		for _, form := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			code, stdout, stderr := runHere(t, form...)
			help := stdout + stderr
			if code != 0 {
				t.Errorf("%v: exit %d:\n%s", form, code, help)
				continue
			}
			first, _, _ := strings.Cut(help, "\n")
			if want := "dibs " + c.name + ": " + c.summary + "."; first != want {
				t.Errorf("%v: first line %q, want %q", form, first, want)
			}
			if !strings.Contains(help, "Usage: dibs "+c.name) {
				t.Errorf("%v: no usage line:\n%s", form, help)
			}
			if m := singleDash.FindString(help); m != "" {
				t.Errorf("%v: a flag written with one dash (%q):\n%s", form, m, help)
			}
			if strings.Contains(help, "env-secret") {
				t.Errorf("%v: shows a value from the environment:\n%s", form, help)
			}
		}
	}
	_, _, serve := runHere(t, "serve", "--help")
	for _, flag := range []string{"--addr", "--redis", "--db", "--admin-token", "--config", "--data-dir", "--instance", "--log-format", "DIBS_ADMIN_TOKEN", "127.0.0.1"} {
		if !strings.Contains(serve, flag) {
			t.Errorf("serve --help lacks %s:\n%s", flag, serve)
		}
	}
}

// TestTopLevelHelp: dibs alone prints the commands and exits 2; --help and
// help exit 0.
func TestTopLevelHelp(t *testing.T) {
	t.Parallel()
	code, _, stderr := runHere(t)
	if code != 2 || !strings.Contains(stderr, "Commands:") {
		t.Fatalf("dibs alone: exit %d\n%s", code, stderr)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := runHere(t, args...)
		if code != 0 || !strings.HasPrefix(stdout+stderr, "dibs runs limited-stock") {
			t.Errorf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
}

// TestVersion: dibs --version and dibs version print the version, the
// commit and the build date on one line.
func TestVersion(t *testing.T) {
	t.Parallel()
	shape := regexp.MustCompile(`^dibs \S+ \(commit \S+, built \S+, go[0-9.]+\S*\)\n$`)
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		code, stdout, stderr := runHere(t, args...)
		if code != 0 || !shape.MatchString(stdout) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if code, _, _ := runHere(t, "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d, want 2", code)
	}
}
