package main

import (
	"context"
	"fmt"
	"io"

	"github.com/dibsio/dibs/internal/buildinfo"
)

// runVersion prints the build: version, commit, commit date and Go
// version, from the module's build information (the same as the
// dibs_build_info metric). A release sets the version at link time with
// -ldflags "-X github.com/dibsio/dibs/internal/buildinfo.version=v1.2.3".
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr,
		"Also 'dibs --version'. The commit and its date come from the build information Go",
		"records from the git checkout (go version -m shows it); 'unknown' without one.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, buildinfo.Get())
	return nil
}
