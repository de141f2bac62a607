package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// Promotions: migration, creation, listing, closing, drain and retirement.

func testMigrate(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("kept"))
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	if _, err := s.GetPromotion(ctx, "kept"); err != nil {
		t.Fatalf("promotion lost by Migrate: %v", err)
	}
}

// testSchemaVersion: the backend says its schema version, the same after
// a second Migrate.
func testSchemaVersion(t *testing.T, s store.Store) {
	sv, ok := s.(store.SchemaVersioner)
	if !ok {
		t.Fatalf("%T does not implement store.SchemaVersioner", s)
	}
	v, err := sv.SchemaVersion(t.Context())
	if err != nil || v < 1 {
		t.Fatalf("SchemaVersion after Migrate = %d, %v; want a version", v, err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again, err := sv.SchemaVersion(t.Context()); err != nil || again != v {
		t.Fatalf("SchemaVersion after a second Migrate = %d, %v; want %d", again, err, v)
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func testCreateGetPromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := promo("full")
	full.Mode = store.ModeGrant
	full.Kind = store.KindPoint
	full.Stock = 0
	full.PerUserLimit = 1
	full.Value = 1 << 40
	full.StartsAt = time.Date(2026, 3, 1, 12, 30, 15, 123456000, time.FixedZone("KST", 9*3600))
	full.EndsAt = full.StartsAt.Add(90 * time.Minute)
	full.ClosedAt = full.StartsAt.Add(time.Minute)
	full.WaitingRoom = store.WaitingRoom{Enabled: true, AdmitPerSecond: 100, EntryTTLSeconds: 300,
		AbandonAfterSeconds: 45, PrequeueSeconds: 600, PrequeueSeed: bytes.Repeat([]byte{0xa5, 0x00, 0xff}, 11)[:32],
		MaxActive: 250, Message: "Doors open at noon — ünïcode", PowDifficulty: 18,
		Page: &store.RoomPage{Title: `Spring "drop" <b>`, Colors: store.RoomPageColors{Background: "#fff", Accent: "#0a7f5a"},
			LogoURL: "https://shop.example/logo.png", Texts: map[string]string{"heading": "Line ☂", "sold_out": "Gone"},
			ReturnURL: "https://shop.example/checkout?from=dibs", Mode: "return"}}
	full.Drained = true
	full.ExpectedClaimsPerSecond = 2500
	full.Segments = 7

	defaults := promo("defaults")
	defaults.CreatedAt = time.Time{}

	mustCreate(t, s, promo("plain"), full)
	before := now()
	mustCreate(t, s, defaults)
	after := now().Add(time.Second)

	for _, want := range []store.Promotion{promo("plain"), full} {
		got, err := s.GetPromotion(ctx, want.ID)
		if err != nil {
			t.Fatalf("GetPromotion(%s): %v", want.ID, err)
		}
		equalPromotion(t, got, want)
	}

	got, err := s.GetPromotion(ctx, "defaults")
	if err != nil {
		t.Fatalf("GetPromotion(defaults): %v", err)
	}
	// A zero CreatedAt is filled in with the time of creation.
	if got.CreatedAt.Before(before.Add(-time.Second)) || got.CreatedAt.After(after) {
		t.Errorf("CreatedAt = %v, want between %v and %v", got.CreatedAt, before, after)
	}
	defaults.CreatedAt = got.CreatedAt
	equalPromotion(t, got, defaults)

	t.Run("exists", func(t *testing.T) {
		other := promo("plain")
		other.Name = "another"
		err := s.CreatePromotion(ctx, other)
		if !errors.Is(err, store.ErrAlreadyExists) {
			t.Fatalf("CreatePromotion of a taken id: %v, want ErrAlreadyExists", err)
		}
		got, err := s.GetPromotion(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		equalPromotion(t, got, promo("plain"))
	})
	t.Run("not found", func(t *testing.T) {
		_, err := s.GetPromotion(ctx, "missing")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetPromotion(missing): %v, want ErrNotFound", err)
		}
		if errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("GetPromotion(missing): %v is not an outage", err)
		}
	})
}

func testListPromotions(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []string
	// Created out of order: the list is ordered by id, not by creation.
	for _, i := range []int{4, 0, 6, 2, 5, 1, 3} {
		mustCreate(t, s, promo(fmt.Sprintf("p-%02d", i)))
	}
	for i := range 7 {
		want = append(want, fmt.Sprintf("p-%02d", i))
	}

	var got []string
	after := ""
	for page := 0; ; page++ {
		ps, err := s.ListPromotions(ctx, after, 3)
		if err != nil {
			t.Fatalf("ListPromotions(%q, 3): %v", after, err)
		}
		if len(ps) > 3 {
			t.Fatalf("page %d has %d promotions, limit 3", page, len(ps))
		}
		if len(ps) == 0 {
			break
		}
		got = append(got, ids(ps)...)
		after = ps[len(ps)-1].ID
		if page > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged ids %v, want %v", got, want)
	}

	all, err := s.ListPromotions(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(all), want) {
		t.Fatalf("ListPromotions(\"\", 100) = %v, want %v", ids(all), want)
	}
	equalPromotion(t, all[3], promo("p-03"))

	mid, err := s.ListPromotions(ctx, "p-02", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(mid), []string{"p-03", "p-04"}) {
		t.Fatalf("ListPromotions(p-02, 2) = %v", ids(mid))
	}
	none, err := s.ListPromotions(ctx, "", 0)
	if err != nil || len(none) != 0 {
		t.Fatalf("ListPromotions with limit 0 = %v, %v; want none", ids(none), err)
	}
}

func testClosePromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("closing")
	mustCreate(t, s, p)
	first := time.Date(2026, 11, 21, 6, 0, 0, 1000, time.UTC)

	got, err := s.ClosePromotion(ctx, p.ID, first)
	if err != nil {
		t.Fatalf("ClosePromotion: %v", err)
	}
	p.ClosedAt = first
	equalPromotion(t, got, p)

	// Closing twice keeps the first time.
	got, err = s.ClosePromotion(ctx, p.ID, first.Add(time.Hour))
	if err != nil {
		t.Fatalf("second ClosePromotion: %v", err)
	}
	equalPromotion(t, got, p)
	got, err = s.GetPromotion(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	equalPromotion(t, got, p)

	if _, err := s.ClosePromotion(ctx, "missing", first); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClosePromotion(missing): %v, want ErrNotFound", err)
	}
}

func testDrained(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("a"), promo("b"), promo("c"))
	undrained := func(want ...string) {
		t.Helper()
		ps, err := s.ListUndrained(ctx)
		if err != nil {
			t.Fatalf("ListUndrained: %v", err)
		}
		got := ids(ps)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("ListUndrained = %v, want %v", got, want)
		}
	}
	undrained("a", "b", "c")
	if err := s.SetDrained(ctx, "b", true); err != nil {
		t.Fatalf("SetDrained: %v", err)
	}
	undrained("a", "c")
	p, err := s.GetPromotion(ctx, "b")
	if err != nil || !p.Drained {
		t.Fatalf("GetPromotion(b) = %+v, %v; want drained", p, err)
	}
	// Setting it twice is harmless.
	if err := s.SetDrained(ctx, "b", true); err != nil {
		t.Fatalf("SetDrained again: %v", err)
	}
	if err := s.SetDrained(ctx, "b", false); err != nil {
		t.Fatalf("SetDrained(false): %v", err)
	}
	undrained("a", "b", "c")
	if err := s.SetDrained(ctx, "missing", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetDrained(missing): %v, want ErrNotFound", err)
	}
}

// testRetire: drained_at counts from the first drain, a promotion is
// retirable once drained long enough, retiring keeps the first time, a
// retired one is listed again only if retired since the given time, and an
// undrained one cannot be retired.
func testRetire(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("r1"), promo("r2"), promo("r3"))
	t0 := now().Add(-time.Hour)
	for i, id := range []string{"r1", "r2"} {
		if err := s.MarkDrained(ctx, id, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatalf("MarkDrained(%s): %v", id, err)
		}
	}
	// Marking again keeps the first time; SetDrained(true) too.
	if err := s.MarkDrained(ctx, "r1", t0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDrained(ctx, "r1", true); err != nil {
		t.Fatal(err)
	}
	p, err := s.GetPromotion(ctx, "r1")
	if err != nil || !p.Drained || !p.DrainedAt.Equal(t0) || !p.RetiredAt.IsZero() {
		t.Fatalf("GetPromotion(r1) = drained %v at %v retired %v, %v; want drained at %v", p.Drained, p.DrainedAt, p.RetiredAt, err, t0)
	}
	list := func(before, since time.Time, limit int, want ...string) {
		t.Helper()
		ps, err := s.ListRetirable(ctx, before, since, limit)
		if err != nil {
			t.Fatalf("ListRetirable: %v", err)
		}
		if got := ids(ps); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("ListRetirable(%v, %v, %d) = %v, want %v", before, since, limit, got, want)
		}
	}
	far := t0.Add(-24 * time.Hour)
	list(t0.Add(-time.Second), far, 10)
	list(t0, far, 10, "r1")
	list(t0.Add(time.Hour), far, 10, "r1", "r2")
	list(t0.Add(time.Hour), far, 1, "r1")
	list(t0.Add(time.Hour), far, 0)

	at := t0.Add(2 * time.Hour)
	rp, err := s.RetirePromotion(ctx, "r1", at)
	if err != nil || !rp.RetiredAt.Equal(at) || !rp.Drained {
		t.Fatalf("RetirePromotion(r1) = retired %v, %v; want %v", rp.RetiredAt, err, at)
	}
	if rp, err = s.RetirePromotion(ctx, "r1", at.Add(time.Hour)); err != nil || !rp.RetiredAt.Equal(at) {
		t.Fatalf("RetirePromotion(r1) again = retired %v, %v; want the first time %v", rp.RetiredAt, err, at)
	}
	// Retired since the given time: listed again (an unfinished retirement
	// is found); retired before it: not.
	list(t0.Add(time.Hour), at, 10, "r2", "r1") // the unretired first
	list(t0.Add(time.Hour), at, 1, "r2")
	list(t0.Add(time.Hour), at.Add(time.Microsecond), 10, "r2")

	if _, err := s.RetirePromotion(ctx, "r3", at); !errors.Is(err, store.ErrNotRetirable) {
		t.Fatalf("RetirePromotion(undrained) = %v, want ErrNotRetirable", err)
	}
	if p, _ := s.GetPromotion(ctx, "r3"); !p.RetiredAt.IsZero() {
		t.Fatalf("undrained promotion got retired at %v", p.RetiredAt)
	}
	if _, err := s.RetirePromotion(ctx, "missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RetirePromotion(missing) = %v, want ErrNotFound", err)
	}
	// A retired promotion stays drained.
	if err := s.SetDrained(ctx, "r1", false); !errors.Is(err, store.ErrRetired) {
		t.Fatalf("SetDrained(retired, false) = %v, want ErrRetired", err)
	}
	if p, _ := s.GetPromotion(ctx, "r1"); !p.Drained {
		t.Fatal("retired promotion marked undrained")
	}
	// Undrained again, DrainedAt is cleared.
	if err := s.SetDrained(ctx, "r2", false); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.GetPromotion(ctx, "r2"); p.Drained || !p.DrainedAt.IsZero() {
		t.Fatalf("undrained r2: drained %v at %v", p.Drained, p.DrainedAt)
	}
	if err := s.MarkDrained(ctx, "missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("MarkDrained(missing) = %v, want ErrNotFound", err)
	}
}
