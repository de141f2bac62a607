package httpapi_test

// The schemas of openapi.json take their members from the Go types the
// server encodes and the client decodes (package api): shapeOf and inputOf
// check each description against its type, so a member added to a shape,
// renamed or retyped fails TestOpenAPIFile until the description follows.

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/dibsio/dibs/httpapi"
)

// shapeError is a schema that does not match its Go type; generatedOpenAPI
// turns it into the test's failure.
type shapeError struct{ msg string }

func (e shapeError) Error() string { return e.msg }

// shapeOf is the schema of the JSON object T encodes (an answer): props
// describes every member of T, by its JSON name, and nothing else; the
// members T always writes (neither omitempty nor omitzero) are required.
func shapeOf[T any](desc string, props J) J {
	t := reflect.TypeFor[T]()
	var required []string
	for _, m := range httpapi.JSONMembers(t) {
		if !m.OmitEmpty {
			required = append(required, m.Name)
		}
	}
	checkShape(t, props)
	return object(desc, required, props)
}

// inputOf is the schema of a request body of type T: props describes every
// member of T and nothing else, required names those the server needs;
// unknown members get 400.
func inputOf[T any](desc string, required []string, props J) J {
	t := reflect.TypeFor[T]()
	checkShape(t, props)
	for _, r := range required {
		if props[r] == nil {
			panic(shapeError{fmt.Sprintf("%v: required member %q is not one of its members", t, r)})
		}
	}
	return input(desc, required, props)
}

// pageOf is the schema of a page of a list, type T: its items under
// member, and next_cursor.
func pageOf[T any](desc, member, item, itemsDesc string) J {
	return shapeOf[T](desc, J{
		member:        array(schema(item), itemsDesc),
		"next_cursor": nextCursor(),
	})
}

// checkShape panics with a shapeError unless props describes exactly the
// JSON members of t, each with the JSON type of its Go type (null allowed
// exactly for a pointer always written).
func checkShape(t reflect.Type, props J) {
	var names []string
	for _, m := range httpapi.JSONMembers(t) {
		names = append(names, m.Name)
		p, ok := props[m.Name].(J)
		if !ok {
			panic(shapeError{fmt.Sprintf("%v: member %q is not described: add it to its schema in openapi_gen_test.go, then go test ./httpapi -run TestOpenAPIFile -update", t, m.Name)})
		}
		if msg := typeMismatch(m, p); msg != "" {
			panic(shapeError{fmt.Sprintf("%v: member %q: %s", t, m.Name, msg)})
		}
	}
	for name := range props {
		if !slices.Contains(names, name) {
			panic(shapeError{fmt.Sprintf("%v: the schema describes %q, which is none of its members", t, name)})
		}
	}
}

// typeMismatch says how schema p does not fit member m's Go type; "" when
// it fits, or when p names no type (a $ref, a oneOf).
func typeMismatch(m httpapi.JSONMember, p J) string {
	var types []string
	switch v := p["type"].(type) {
	case string:
		types = []string{v}
	case []string:
		types = v
	default:
		return ""
	}
	want, ok := schemaTypes[httpapi.JSONKind(m.Type)]
	if !ok {
		return "" // raw JSON: any type
	}
	if !slices.Contains(types, want) {
		return fmt.Sprintf("the schema's type is %s, the Go type %v encodes %s", strings.Join(types, "|"), m.Type, want)
	}
	nullable := m.Type.Kind() == reflect.Pointer && !m.OmitEmpty
	if slices.Contains(types, "null") != nullable {
		return fmt.Sprintf("null in the schema's type is %t, but the Go type %v writes null: %t", !nullable, m.Type, nullable)
	}
	return ""
}

// schemaTypes are the JSON Schema types of what httpapi.JSONKind names.
var schemaTypes = map[string]string{"a whole number": "integer", "a number": "number", "true or false": "boolean",
	"a string": "string", "an array": "array", "an object": "object"}
