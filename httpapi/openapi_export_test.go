package httpapi

import (
	"maps"
	"reflect"
	"slices"
)

// Routes returns the method and path patterns s serves ("GET
// /v1/promotions"), as registered on its mux, sorted.
func Routes(s *Server) []string { return slices.Sorted(slices.Values(s.mux.routes)) }

// CodeStatuses returns every problem code with its HTTP status.
func CodeStatuses() map[string]int { return maps.Clone(codeStatus) }

// JSONMember is a member of the JSON object a struct type encodes.
type JSONMember = jsonMember

// JSONMembers are the members of the JSON object struct type t encodes.
func JSONMembers(t reflect.Type) []JSONMember { return jsonMembers(t) }

// JSONKind is what a member of type t takes in JSON, in the words of the
// server's problems ("a whole number", "a string", …; "anything" for raw
// JSON).
func JSONKind(t reflect.Type) string { return wireKind(t) }
