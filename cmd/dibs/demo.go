package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/dibsio/dibs/bench"
	"github.com/dibsio/dibs/internal/assembly/demo"
)

// The seed scenario: 1,000 stock, 2,000 users in 10 waves of 200.
const (
	demoStock = 1000
	demoUsers = 2000
	demoWaves = 10
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "[flags]", stderr,
		"Starts a throw-away server on the embedded default (a private redis-server and a",
		"SQLite file in a temporary directory), runs the seed scenario through the HTTP API,",
		"prints the report and exits 0 only if every invariant held. With --waiting-room the",
		"users go through the promotion's waiting room: join, follow their status, claim",
		"with the entry token once admitted.")
	stock := fs.Int("stock", demoStock, "promotion stock")
	users := fs.Int("users", demoUsers, "number of users, each claiming once")
	waves := fs.Int("waves", demoWaves, "number of waves the users are split into; each wave's claims start together")
	confirmTimeout := fs.Duration("confirm-timeout", bench.DefaultConfirmTimeout, "how long to wait for every accepted claim to be issued")
	var room roomFlags
	room.register(fs)
	var opts demo.Options
	registerRunFlags(fs, &opts)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := bench.Config{
		Stock:          *stock,
		Users:          *users,
		Waves:          *waves,
		PerUserLimit:   1,
		ConfirmTimeout: *confirmTimeout,
	}
	if room.on {
		// The room paces the users: no waves.
		cfg.Waves = 0
		room.apply(&cfg)
	} else if *waves < 1 {
		fmt.Fprintln(stderr, "dibs demo: --waves must be at least 1")
		return errUsage
	}
	return demo.Run(ctx, cfg, opts, stdout, stderr)
}

// roomFlags are the waiting-room flags of demo and bench.
type roomFlags struct {
	on          bool
	admitPerSec int
	powDiff     int
	maxPoll     time.Duration
	timeout     time.Duration
}

func (f *roomFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "waiting-room", false, "send the users through the promotion's waiting room: join, follow the status, claim when admitted")
	fs.IntVar(&f.admitPerSec, "admit-per-second", bench.DefaultAdmitPerSecond, "the waiting room's admission rate (with --waiting-room)")
	fs.IntVar(&f.powDiff, "pow-difficulty", 0, "the waiting room's proof-of-work difficulty, 0..24 leading zero bits (with --waiting-room): every join solves a challenge first, and the report gives the solves' times")
	fs.DurationVar(&f.maxPoll, "max-poll", bench.DefaultMaxPoll, "longest pause between a waiting user's status lookups, whatever poll_after_ms says (with --waiting-room)")
	fs.DurationVar(&f.timeout, "room-timeout", bench.DefaultRoomTimeout, "how long users may spend in the waiting room (with --waiting-room)")
}

func (f *roomFlags) apply(cfg *bench.Config) {
	cfg.WaitingRoom = f.on
	cfg.AdmitPerSecond = f.admitPerSec
	cfg.PowDifficulty = f.powDiff
	cfg.MaxPoll = f.maxPoll
	cfg.RoomTimeout = f.timeout
}
