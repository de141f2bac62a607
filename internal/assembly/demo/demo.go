// Package demo runs a load scenario the way dibs demo and dibs bench do:
// against a running server, or against a throw-away local `dibs serve` it
// starts as a child process (a private redis-server and a SQLite file in a
// temporary directory) and stops around the run.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dibsio/dibs/bench"
)

// RoomServerConfig is the configuration of the local server of a
// waiting-room run: the scheduler ticks every 100 ms.
const RoomServerConfig = "waiting_room:\n  tick_ms: 100\n"

// Options are the output and local-server settings of a run.
type Options struct {
	// JSON prints the report as one JSON object; progress goes to stderr.
	JSON bool
	// Keep keeps the local server's temporary directory.
	Keep bool
	// ServerLog streams the local server's log to stderr.
	ServerLog bool
}

// Run runs cfg against cfg.Target, or, when that is empty, against a
// throw-away local server it starts and stops around the run. It prints
// progress and the report (with the first winners and their codes), and
// returns nil only if every check passed and the local server (if any)
// stopped cleanly.
func Run(ctx context.Context, cfg bench.Config, opts Options, stdout, stderr io.Writer) error {
	progress := stdout
	if opts.JSON {
		progress = stderr
	}
	cfg.Progress = progress

	var srv *Server
	if cfg.Target == "" {
		// Find a bad flag before paying for a server.
		probe := cfg
		probe.Target, probe.AdminToken = "http://127.0.0.1:1", "x"
		if err := probe.Validate(); err != nil {
			return err
		}
		var logTo io.Writer
		if opts.ServerLog {
			logTo = stderr
		}
		fmt.Fprintln(progress, "starting a local dibs server (embedded Redis and SQLite) ...")
		var err error
		scfg := ServerConfig{Keep: opts.Keep, LogTo: logTo}
		if cfg.WaitingRoom {
			// Ticks of 100 ms rather than a second: the admission rate is
			// then measured to within a few percent over a run of seconds.
			scfg.ConfigYAML = RoomServerConfig
		}
		srv, err = StartServer(ctx, scfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "server listening on %s, data in %s\n", srv.URL, srv.Dir)
		cfg.Target, cfg.AdminToken = srv.URL, srv.AdminToken
	}

	rep, runErr := bench.Run(ctx, cfg)
	if runErr == nil {
		// Before the local server stops: the winners are read from it.
		rep.Winners = readWinners(ctx, cfg, rep.PromotionID, progress)
	}
	var stopErr error
	if srv != nil {
		stopErr = srv.Stop()
		if opts.Keep {
			fmt.Fprintf(progress, "kept %s\n", srv.Dir)
		}
	}
	if runErr != nil {
		// stopErr says why when the run failed because the server died.
		return errors.Join(runErr, stopErr)
	}

	fmt.Fprintln(progress)
	var werr error
	if opts.JSON {
		werr = rep.WriteJSON(stdout)
	} else {
		werr = rep.WriteText(stdout)
	}
	var checkErr error
	if !rep.OK() {
		checkErr = fmt.Errorf("invariant checks failed: %s", strings.Join(rep.Failed(), ", "))
	}
	return errors.Join(checkErr, werr, stopErr)
}

// winnersTimeout bounds reading the winners after a run.
const winnersTimeout = 10 * time.Second

// readWinners reads the first bench.DefaultWinners issued claims of the
// run's promotion, with their codes, for the report. A failure is said on
// progress and leaves them out (nil): the run's checks do not rest on them.
func readWinners(ctx context.Context, cfg bench.Config, promotionID string, progress io.Writer) []bench.Winner {
	rctx, cancel := context.WithTimeout(ctx, winnersTimeout)
	defer cancel()
	ws, err := bench.ReadWinners(rctx, cfg.HTTPClient, cfg.Target, cfg.AdminToken, promotionID, bench.DefaultWinners)
	if err != nil {
		fmt.Fprintf(progress, "winners not shown: %v\n", err)
		return nil
	}
	return ws
}
