package promotion

import (
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a queue page does once its user is admitted (RoomPage.Mode).
const (
	// PageModeClaim claims at once with the entry token and shows the
	// result. The default.
	PageModeClaim = "claim"
	// PageModeReturn sends the user to RoomPage.ReturnURL with the entry
	// token in the URL fragment (#entry_token=…), for the shop's own page
	// to claim with.
	PageModeReturn = "return"
)

// Limits of a RoomPage.
const (
	// MaxPageTitle bounds RoomPage.Title, in characters.
	MaxPageTitle = 200
	// MaxPageText bounds each of RoomPage.Texts, in characters.
	MaxPageText = 500
	// MaxPageURLLength bounds RoomPage.LogoURL and RoomPage.ReturnURL, in
	// bytes.
	MaxPageURLLength = 2048
)

// PageTexts are the names of the texts a RoomPage may replace, each with
// the page's default (in English).
var PageTexts = map[string]string{
	"heading":     "You are in line",
	"waiting":     "Keep this page open: you are let in in turn. Reloading the page keeps your place.",
	"prequeue":    "The sale has not started. Everyone who arrives before the start gets a random place at the start: there is no need to hurry.",
	"paused":      "The sale is paused. You keep your place, and it goes on from where it stopped.",
	"stock_short": "The remaining stock may run out before your turn.",
	"admitted":    "It is your turn.",
	"claimed":     "You got one!",
	"sold_out":    "Sold out. Thank you for waiting.",
	"ended":       "This sale has ended.",
	"used":        "You have taken part in this sale already.",
	"expired":     "Your turn passed before you used it. You may join the line again.",
}

// hexColor is a CSS hex colour of 3 or 6 digits.
var hexColor = regexp.MustCompile(`^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

// normalizePage fills in and checks the queue page of w: only with the
// waiting room enabled; the mode defaults to PageModeClaim, and
// PageModeReturn needs a return URL.
func normalizePage(w *WaitingRoom) error {
	pg := w.Page
	if pg == nil {
		return nil
	}
	if !w.Enabled {
		return invalid("waiting_room.page", "needs the waiting room enabled")
	}
	if err := pageString("waiting_room.page.title", pg.Title, MaxPageTitle, false); err != nil {
		return err
	}
	for _, c := range []struct{ name, v string }{
		{"background", pg.Colors.Background}, {"text", pg.Colors.Text}, {"accent", pg.Colors.Accent},
	} {
		if c.v != "" && !hexColor.MatchString(c.v) {
			return invalid("waiting_room.page.colors."+c.name, "must be a hex colour such as #0a7f5a or #fff")
		}
	}
	if pg.LogoURL != "" {
		if err := pageURL("waiting_room.page.logo_url", pg.LogoURL, false); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pg.Texts)) {
		if _, ok := PageTexts[name]; !ok {
			return invalid("waiting_room.page.texts."+name, "is not a text of the page; the texts are %s", strings.Join(pageTextNames(), ", "))
		}
		if err := pageString("waiting_room.page.texts."+name, pg.Texts[name], MaxPageText, true); err != nil {
			return err
		}
	}
	if pg.ReturnURL != "" {
		if err := pageURL("waiting_room.page.return_url", pg.ReturnURL, true); err != nil {
			return err
		}
	}
	switch pg.Mode {
	case "":
		pg.Mode = PageModeClaim
	case PageModeClaim:
	case PageModeReturn:
		if pg.ReturnURL == "" {
			return invalid("waiting_room.page.return_url", "is required with mode return")
		}
	default:
		return invalid("waiting_room.page.mode", "must be claim or return")
	}
	return nil
}

// samePage reports whether a and b are the same setting (nil for none).
func samePage(a, b *RoomPage) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Title == b.Title && a.Colors == b.Colors && a.LogoURL == b.LogoURL &&
		maps.Equal(a.Texts, b.Texts) && a.ReturnURL == b.ReturnURL && a.Mode == b.Mode
}

// pageTextNames are the names of PageTexts, sorted.
func pageTextNames() []string { return slices.Sorted(maps.Keys(PageTexts)) }

// pageString checks a text of the page: valid UTF-8, at most maxLen
// characters, no control characters (but line feeds where lines is set).
func pageString(field, s string, maxLen int, lines bool) error {
	if !utf8.ValidString(s) {
		return invalid(field, "must be UTF-8")
	}
	if utf8.RuneCountInString(s) > maxLen {
		return invalid(field, "must be at most %d characters", maxLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) && (r != '\n' || !lines) {
			return invalid(field, "must not hold control characters")
		}
	}
	return nil
}

// pageURL checks a URL of the page: absolute, https (or, for a return URL,
// http to the local host, for a shop under development), with a host, no
// user info, no fragment, at most MaxPageURLLength bytes.
func pageURL(field, raw string, local bool) error {
	if len(raw) > MaxPageURLLength {
		return invalid(field, "must be at most %d bytes", MaxPageURLLength)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return invalid(field, "is not a URL")
	case u.Host == "" || u.Hostname() == "":
		return invalid(field, "must be an absolute URL with a host")
	case u.Scheme == "https":
	case u.Scheme == "http" && local && isLocalHost(u.Hostname()):
	case local:
		return invalid(field, "must be an https URL (or http on localhost)")
	default:
		return invalid(field, "must be an https URL")
	}
	switch {
	case u.User != nil:
		return invalid(field, "must not carry user info")
	case u.Fragment != "" || u.RawFragment != "" || strings.Contains(raw, "#"):
		return invalid(field, "must not have a fragment")
	}
	return nil
}

// isLocalHost says whether host names this machine.
func isLocalHost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
