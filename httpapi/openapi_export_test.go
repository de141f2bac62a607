package httpapi

import (
	"maps"
	"slices"
)

// Routes returns the method and path patterns s serves ("GET
// /v1/promotions"), as registered on its mux, sorted.
func Routes(s *Server) []string { return slices.Sorted(slices.Values(s.mux.routes)) }

// CodeStatuses returns every problem code with its HTTP status.
func CodeStatuses() map[string]int { return maps.Clone(codeStatus) }
