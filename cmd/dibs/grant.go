package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dibsio/dibs/client"
)

// maxGrantLine bounds one line of a grant file; the server takes lines of
// up to 64 KiB.
const maxGrantLine = 1 << 20

func runGrant(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newOpsFlagSet("grant", " FILE", "upload the target users of a grant promotion from a file", stderr,
		"FILE (- for standard input) holds one user id per line, or NDJSON lines",
		`{"user_id": "..."}; blank lines are skipped. It is streamed to the server, which`,
		"enqueues each user once: re-sending a user already granted is a duplicate, so",
		"uploading a corrected file again is safe. Rejected lines are listed by their line",
		"number, and make the command exit 1.")
	promo := fs.String("promotion", "", "id of the grant promotion (required)")
	opts := keyFlag(fs)
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *promo == "" {
		return usageErrorf("--promotion is required")
	}
	var in io.Reader = os.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return usageErrorf("%v", err)
		}
		defer f.Close()
		in = f
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	// The file is turned into NDJSON as the request reads it: a line for a
	// line, so the server's line numbers are the file's.
	pr, pw := io.Pipe()
	converted := make(chan error, 1)
	go func() {
		err := toNDJSON(in, pw)
		pw.CloseWithError(err)
		converted <- err
	}()
	res, err := c.GrantNDJSON(ctx, *promo, pr, opts()...)
	pr.Close() // ends the converter if the request stopped reading early
	if cerr := <-converted; cerr != nil && !errors.Is(cerr, io.ErrClosedPipe) && err != nil {
		return cerr // the file broke off the upload, not the server
	}
	if err != nil {
		return err
	}
	if sf.json {
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "enqueued %d, duplicates %d, rejected %d\n", res.Enqueued, res.Duplicates, res.Rejected)
		for _, e := range res.Errors {
			fmt.Fprintf(stdout, "line %d: %s: %s\n", e.Line, e.Code, oneLine(e.Detail))
		}
	}
	switch {
	case res.Rejected == 1:
		return fmt.Errorf("%s: 1 line rejected", client.CodeInvalidRequest)
	case res.Rejected > 1:
		return fmt.Errorf("%s: %d lines rejected", client.CodeInvalidRequest, res.Rejected)
	}
	return nil
}

// toNDJSON copies r to w line by line: a line that starts with "{" as it
// is, a blank line as a blank line, anything else as {"user_id": line}.
func toNDJSON(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxGrantLine)
	bw := bufio.NewWriter(w)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		switch {
		case len(line) == 0:
		case line[0] == '{':
			bw.Write(line)
		default:
			b, _ := json.Marshal(struct {
				UserID string `json:"user_id"`
			}{string(line)}) // a struct of a string always marshals
			bw.Write(b)
		}
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read grant file: %w", err)
	}
	return bw.Flush()
}
