package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/dibsio/dibs/httpapi/queuepage"
	"github.com/dibsio/dibs/promotion"
)

// pageRoutes mounts the waiting room's queue page (package queuepage): the
// page of each promotion with a waiting room, its assets and the
// standalone script.
func (s *Server) pageRoutes() {
	h, err := queuepage.New(queuepage.Config{Lookup: s.pageRoom, UserTokens: s.cfg.Edge.UserTokens.On(), Logger: s.log})
	if err != nil {
		panic(err) // Lookup is set: cannot happen
	}
	// By method alone: a fallback of its own would overlap GET /w/{id};
	// other methods get that path's 405.
	s.mux.HandleFunc("GET "+queuepage.SnippetPath, h.Snippet)
	s.route(queuepage.AssetPath, map[string]http.HandlerFunc{"GET": h.Asset})
	s.route(queuepage.PagePath, map[string]http.HandlerFunc{"GET": s.bounded(h.Page)})
}

// pageRoom is what the queue page of promotion id needs:
// queuepage.ErrNoPage for an unknown promotion, one without a waiting
// room, or a server that runs none.
func (s *Server) pageRoom(ctx context.Context, id string) (queuepage.Room, error) {
	p, err := s.cfg.Manager.PageOf(ctx, id)
	switch {
	case errors.Is(err, promotion.ErrNotFound):
		return queuepage.Room{}, queuepage.ErrNoPage
	case err != nil:
		return queuepage.Room{}, err
	case !p.WaitingRoom.Enabled || s.cfg.Manager.Rooms() == nil:
		return queuepage.Room{}, queuepage.ErrNoPage
	}
	return queuepage.Room{ID: p.ID, Name: p.Name, Page: p.WaitingRoom.Page}, nil
}
