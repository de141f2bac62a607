package service

import (
	"log/slog"
	"strings"
	"testing"
)

// TestCheckEnv: a secret or credential set but empty, or holding the
// placeholder change-me, is refused naming its variable; other variables,
// and real values, pass.
func TestCheckEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  string
		want string // "" when it passes
	}{
		{"DIBS_ADMIN_TOKEN=", "DIBS_ADMIN_TOKEN is set but empty"},
		{"DIBS_ADMIN_TOKEN=  ", "DIBS_ADMIN_TOKEN is set but empty"},
		{"DIBS_WAITROOM_SECRET=", "DIBS_WAITROOM_SECRET is set but empty"},
		{"DIBS_ERASE_SECRET=", "DIBS_ERASE_SECRET is set but empty"},
		{"DIBS_WEBHOOK_SECRET=", "DIBS_WEBHOOK_SECRET is set but empty"},
		{"DIBS_USER_TOKEN_SECRET=", "DIBS_USER_TOKEN_SECRET is set but empty"},
		{"DIBS_EVENTS_SECRET_CRM_EU=", "DIBS_EVENTS_SECRET_CRM_EU is set but empty"},
		{"DIBS_DATABASE_URL=", "DIBS_DATABASE_URL is set but empty"},
		{"DIBS_REDIS_URL=", "DIBS_REDIS_URL is set but empty"},
		{"DIBS_ADMIN_TOKEN=change-me", `DIBS_ADMIN_TOKEN holds the placeholder "change-me"`},
		{"DIBS_ADMIN_TOKEN=change-me-to-a-long-random-token", `DIBS_ADMIN_TOKEN holds the placeholder "change-me"`},
		{"DIBS_WAITROOM_SECRET=k1:change-me", `DIBS_WAITROOM_SECRET holds the placeholder "change-me"`},
		{"DIBS_DATABASE_URL=postgres://dibs:change-me@db/dibs", `DIBS_DATABASE_URL holds the placeholder "change-me"`},
		{"DIBS_ADMIN_TOKEN=3f9c1e0b7a2d4c6e8f0a1b2c3d4e5f60", ""},
		{"DIBS_DATABASE_URL=postgres://dibs:s3cret@db/dibs", ""},
		{"DIBS_CONFIG=", ""}, // not a secret: empty means no file
		{"DIBS_EVENTS_SECRET_=", ""},
		{"OTHER=change-me", ""},
	}
	for _, c := range cases {
		err := CheckEnv([]string{"PATH=/usr/bin", c.env}, ServeSecretEnv...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it to pass", c.env, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.env, err, c.want)
		}
	}
}

// TestPlaceholderAdminTokenInFile: an admin token of the file that is the
// placeholder is refused, naming its key.
func TestPlaceholderAdminTokenInFile(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, "admin:\n  tokens:\n    - {name: ci, token: change-me}\n")
	if err == nil || !strings.Contains(err.Error(), `admin.tokens[0].token (ci) is the placeholder "change-me"`) {
		t.Fatalf("got %v", err)
	}
}

// TestStreamZeroRefused: a stream setting given as 0 in the file, which
// the stream package would take for its default, is refused with what the
// setting wants; left out, it gets the default.
func TestStreamZeroRefused(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"batch_size":         "stream.batch_size must be at least 1, got 0",
		"block_ms":           "stream.block_ms must be at least 1, got 0",
		"max_deliveries":     "stream.max_deliveries must be at least 1, got 0",
		"lease_ttl_ms":       "stream.lease_ttl_ms must be at least 3, got 0",
		"handler_timeout_ms": "stream.handler_timeout_ms must be positive, got 0",
	} {
		_, err := loadYAML(t, "stream:\n  "+key+": 0\n")
		if err == nil || !strings.HasSuffix(err.Error(), ": "+want) {
			t.Errorf("%s: 0 gives %v, want %q", key, err, want)
		}
	}
	c, err := loadYAML(t, "stream:\n  batch_wait_ms: 0\n  trim_acked: false\n")
	if err != nil || c.Stream.BatchSize != 100 || c.Stream.BatchWait != 0 {
		t.Fatalf("0 where it means off, batch_size left out: %v, batch_size %d, batch_wait %s", err, c.Stream.BatchSize, c.Stream.BatchWait)
	}
}

// TestGeneratedAdminTokenLogLine: the token made up at start is logged
// with the advice to set DIBS_ADMIN_TOKEN, which ps does not show, not a
// flag.
func TestGeneratedAdminTokenLogLine(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var logs syncBuffer
	s.log = slog.New(slog.NewTextHandler(&logs, nil))
	s.cfg.AdminToken = ""
	serve(t, s)
	if !strings.Contains(logs.String(), `msg="generated admin token; set DIBS_ADMIN_TOKEN to choose one"`) {
		t.Fatalf("no log line naming DIBS_ADMIN_TOKEN:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "--admin-token") {
		t.Fatalf("the log advises the flag:\n%s", logs.String())
	}
}
