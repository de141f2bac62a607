package service

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/dibsio/dibs/httpapi"
)

func TestAdminConfig(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("ops-secret"))
	good := AdminConfig{Tokens: []AdminTokenConfig{
		{Name: "ci", Token: "ci-secret"},
		{Name: "ops", TokenSHA256: hex.EncodeToString(sum[:])},
	}}
	ts, err := good.apiTokens()
	if err != nil {
		t.Fatal(err)
	}
	if ts[0] != httpapi.HashAdminToken("ci", "ci-secret") || ts[1] != httpapi.HashAdminToken("ops", "ops-secret") {
		t.Fatalf("tokens %+v", ts)
	}
	for _, tt := range []struct {
		name string
		tok  AdminTokenConfig
		want string
	}{
		{"bad name", AdminTokenConfig{Name: "-x", Token: "t"}, "admin.tokens[0].name"},
		{"default taken", AdminTokenConfig{Name: "default", Token: "t"}, "is taken"},
		{"neither", AdminTokenConfig{Name: "a"}, "exactly one"},
		{"both", AdminTokenConfig{Name: "a", Token: "t", TokenSHA256: hex.EncodeToString(sum[:])}, "exactly one"},
		{"short hash", AdminTokenConfig{Name: "a", TokenSHA256: "abcd"}, "64 hex digits"},
	} {
		err := AdminConfig{Tokens: []AdminTokenConfig{tt.tok}}.validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error with %q", tt.name, err, tt.want)
		}
	}
	dup := AdminConfig{Tokens: []AdminTokenConfig{{Name: "a", Token: "1"}, {Name: "a", Token: "2"}}}
	if err := dup.validate(); err == nil || !strings.Contains(err.Error(), "admin.tokens[1]") {
		t.Errorf("duplicate name: %v", err)
	}
}
