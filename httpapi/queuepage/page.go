package queuepage

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/dibsio/dibs/promotion"
)

// CSP is the Content-Security-Policy of the queue page: its own scripts
// and styles only, images from itself or any https origin (the logo),
// requests to itself only, no framing, no base URL, no form posts.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Routes of the page, as the server registers them.
const (
	// PagePath is the queue page of promotion {id}.
	PagePath = "/w/{id}"
	// SnippetPath is the standalone script.
	SnippetPath = "/w/dibs-waitroom.js"
	// AssetPath is the page's other files (page.css, page.js, icon.svg).
	AssetPath = "/w/assets/{file}"
)

// ErrNoPage is what Config.Lookup answers for a promotion that is unknown
// or has no waiting room: the page answers 404.
var ErrNoPage = errors.New("queuepage: no such waiting room")

//go:embed static
var static embed.FS

// files are the embedded files, at the root.
var files = mustSub(static, "static")

// assets are the files served under AssetPath.
var assets = map[string]string{
	"page.css": "text/css; charset=utf-8",
	"page.js":  "text/javascript; charset=utf-8",
	"icon.svg": "image/svg+xml",
}

var pageTemplate = template.Must(template.ParseFS(files, "page.html"))

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded: cannot happen
	}
	return sub
}

// Room is what the page needs of a promotion.
type Room struct {
	// ID is the promotion's id.
	ID string
	// Name is the promotion's name, the page's title when its setting
	// has none.
	Name string
	// Page is the promotion's page setting; nil for the defaults.
	Page *promotion.RoomPage
}

// Config configures the Handler.
type Config struct {
	// Lookup returns the promotion of a page, or ErrNoPage for one that is
	// unknown or has no waiting room; any other error answers 503.
	// Required.
	Lookup func(ctx context.Context, id string) (Room, error)
	// UserTokens is whether the server asks for user tokens (edge
	// user_tokens): without them the page refuses to work, since it could
	// not tell who its user is. Defaults to false.
	UserTokens bool
	// Logger receives the lookups that failed. Defaults to slog.Default().
	Logger *slog.Logger
}

// Handler serves the queue page, its assets and the standalone script.
type Handler struct {
	cfg Config
}

// New returns the Handler; an error names the Config field that cannot
// work.
func New(cfg Config) (*Handler, error) {
	if cfg.Lookup == nil {
		return nil, errors.New("queuepage: Config.Lookup is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg}, nil
}

// pageConfig is the JSON the page reads from its data-config attribute.
type pageConfig struct {
	Promotion  string                   `json:"promotion"`
	Title      string                   `json:"title"`
	Colors     promotion.RoomPageColors `json:"colors"`
	LogoURL    string                   `json:"logo_url,omitempty"`
	Texts      map[string]string        `json:"texts"`
	ReturnURL  string                   `json:"return_url,omitempty"`
	Mode       string                   `json:"mode"`
	UserTokens bool                     `json:"user_tokens"`
}

// configOf is the page's configuration for room: its setting with every
// default filled in.
func (h *Handler) configOf(room Room) pageConfig {
	c := pageConfig{Promotion: room.ID, Title: room.Name, Mode: promotion.PageModeClaim,
		Texts: maps.Clone(promotion.PageTexts), UserTokens: h.cfg.UserTokens}
	if pg := room.Page; pg != nil {
		if pg.Title != "" {
			c.Title = pg.Title
		}
		c.Colors, c.LogoURL, c.ReturnURL = pg.Colors, pg.LogoURL, pg.ReturnURL
		maps.Copy(c.Texts, pg.Texts)
		if pg.Mode != "" {
			c.Mode = pg.Mode
		}
	}
	if c.Title == "" {
		c.Title = "Waiting room"
	}
	return c
}

// pageData fills page.html.
type pageData struct {
	Title  string
	Config string // the JSON of pageConfig; empty for the 404 page
	Status int
}

// Page serves GET /w/{id}: the queue page of the promotion, 404 for one
// that is unknown or has no waiting room (or a malformed id), 503 when the
// promotion could not be read. Every answer is HTML with the CSP.
func (h *Handler) Page(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data := pageData{Title: "No such waiting room", Status: http.StatusNotFound}
	if promotion.ValidID(id) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		room, err := h.cfg.Lookup(ctx, id)
		cancel()
		switch {
		case err == nil:
			c := h.configOf(room)
			blob, _ := json.Marshal(c) // strings and maps of strings always encode
			data = pageData{Title: c.Title, Config: string(blob), Status: http.StatusOK}
		case errors.Is(err, ErrNoPage):
		default:
			h.cfg.Logger.WarnContext(r.Context(), "queue page: read the promotion", "promotion", id, "err", err)
			data = pageData{Title: "Waiting room unavailable", Status: http.StatusServiceUnavailable}
			w.Header().Set("Retry-After", "5")
		}
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, data); err != nil {
		panic(err) // a fixed template over strings: cannot fail
	}
	secure(w.Header(), "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(data.Status)
	_, _ = w.Write(buf.Bytes())
}

// Asset serves GET /w/assets/{file}: page.css, page.js and icon.svg; 404 (plain
// text) for anything else.
func (h *Handler) Asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ctype, ok := assets[name]
	if !ok {
		secure(w.Header(), "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("no such file\n"))
		return
	}
	h.serveFile(w, r, name, ctype)
}

// Snippet serves GET /w/dibs-waitroom.js, the standalone script. Any page
// may load it (it is public and holds no secret).
func (h *Handler) Snippet(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cross-Origin-Resource-Policy", "cross-origin")
	h.serveFile(w, r, "dibs-waitroom.js", "text/javascript; charset=utf-8")
}

// serveFile serves an embedded file, cacheable for 5 minutes (the files
// change with the binary only).
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, name, ctype string) {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	secure(w.Header(), ctype)
	w.Header().Set("Cache-Control", "public, max-age=300")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// secure sets the content type and the headers that keep a page to
// itself: the CSP, no sniffing, no referrer, no framing.
func secure(hd http.Header, ctype string) {
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
}
