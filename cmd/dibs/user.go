package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dibsio/dibs/client"
)

// userReport is what dibs user prints, also its --json form.
type userReport struct {
	UserID string `json:"user_id"`
	// Balance is the user's points over every promotion.
	Balance *client.Balance `json:"balance"`
	// Promotions are the user's standings, in the order of the list of
	// promotions: those where the user has a claim, or every one read with
	// --all.
	Promotions []userStanding `json:"promotions"`
	// Read is how many promotions were read.
	Read int `json:"promotions_read"`
}

// userStanding is a user's standing in one promotion.
type userStanding struct {
	PromotionID string `json:"promotion_id"`
	Name        string `json:"name,omitempty"`
	State       string `json:"state"`
	client.UserClaims
}

func runUser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newOpsFlagSet("user", " USER_ID", "a user's claims and standing across promotions", stderr,
		"Reads the user's points (GET /v1/users/{user_id}/balance), then the user's claims",
		"in each promotion (GET /v1/promotions/{id}/claims/{user_id}, one request per",
		"promotion) and prints the promotions where the user has any. With --json it",
		"prints one object: user_id, balance, promotions (each promotion_id, name, state,",
		"status, claims) and promotions_read.")
	state := fs.String("state", "", "read only the promotions in this state (default every one not archived; archived: the archived ones)")
	all := fs.Bool("all", false, "list every promotion read, also those where the user has no claim (status none)")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	user := pos[0]
	rep := userReport{UserID: user, Promotions: []userStanding{}}
	if rep.Balance, err = c.Balance(ctx, user); err != nil {
		return err
	}
	for p, err := range c.Promotions(ctx, client.PromotionFilter{State: *state}) {
		if err != nil {
			return err
		}
		rep.Read++
		uc, err := c.ClaimStatus(ctx, p.ID, user)
		if err != nil {
			return err
		}
		if *all || uc.Status != client.StatusNone || len(uc.Claims) > 0 {
			rep.Promotions = append(rep.Promotions, userStanding{PromotionID: p.ID, Name: p.Name, State: stateOf(p), UserClaims: *uc})
		}
	}
	if sf.json {
		return writeJSON(stdout, rep)
	}
	return printUser(stdout, rep)
}

// printUser writes the report as a heading and one row per claim.
func printUser(w io.Writer, rep userReport) error {
	fmt.Fprintf(w, "user %s: points %d (%d entries); claims in %d of %d promotions read\n",
		rep.UserID, rep.Balance.Balance, rep.Balance.Entries, countWithClaims(rep.Promotions), rep.Read)
	if len(rep.Promotions) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROMOTION\tSTATE\tSTANDING\tCLAIM ID\tRANK\tCLAIM STATUS\tISSUED AT\tCODE")
	for _, s := range rep.Promotions {
		if len(s.Claims) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\n", s.PromotionID, s.State, s.Status)
			continue
		}
		for _, cl := range s.Claims {
			issued := "-"
			if cl.IssuedAt != nil {
				issued = cl.IssuedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.PromotionID, s.State, s.Status,
				cl.ClaimID, cl.Rank, cl.Status, issued, orDash(cl.Code))
		}
	}
	return tw.Flush()
}

func countWithClaims(ss []userStanding) int {
	n := 0
	for _, s := range ss {
		if len(s.Claims) > 0 {
			n++
		}
	}
	return n
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
