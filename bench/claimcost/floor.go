package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
)

// floorClaim is the claim body, decoded as strictly as dibs decodes it.
type floorClaim struct {
	UserID string `json:"user_id"`
}

// floorHandler decodes the claim body with encoding/json (unknown fields
// refused, nothing after the value, at most 64 KiB) and answers a 202 with
// a claim-shaped JSON body: the work every HTTP claim server does before it
// does anything of its own.
func floorHandler() http.Handler {
	var rank atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in floorClaim
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || in.UserID == "" {
			http.Error(w, "bad claim", http.StatusBadRequest)
			return
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			http.Error(w, "bad claim", http.StatusBadRequest)
			return
		}
		n := rank.Add(1)
		out, _ := json.Marshal(struct {
			Status  string `json:"status"`
			ClaimID string `json:"claim_id"`
			Rank    int64  `json:"rank"`
		}{"pending", "floor#" + strconv.FormatInt(n, 10), n})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(append(out, '\n'))
	})
}

// floor serves floorHandler until SIGTERM or SIGINT.
func floor(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Println("listening", ln.Addr())
	srv := &http.Server{Handler: floorHandler()}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-sig
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
