package ident_test

import (
	"fmt"

	"github.com/dibsio/dibs/ident"
)

func ExampleValid() {
	for _, id := range []string{"spring-drop", "user@example.com", "-leading-dash", "has space", ""} {
		fmt.Printf("%q %v\n", id, ident.Valid(id))
	}
	if !ident.Valid("a/b") {
		fmt.Println("user_id must be " + ident.Rule)
	}
	// Output:
	// "spring-drop" true
	// "user@example.com" true
	// "-leading-dash" false
	// "has space" false
	// "" false
	// user_id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit
}
