package stream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestServerVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		info    string
		version string
		ok      bool
		bad     bool
	}{
		{name: "redis 7.0", info: "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n", version: "7.0.15", ok: true},
		{name: "redis 7.0.0", info: "redis_version:7.0.0\r\n", version: "7.0.0", ok: true},
		{name: "redis 7.4", info: "redis_version:7.4.1\r\n", version: "7.4.1", ok: true},
		{name: "redis 8", info: "redis_version:8.0.2\r\n", version: "8.0.2", ok: true},
		{name: "redis unstable", info: "redis_version:255.255.255\r\n", version: "255.255.255", ok: true},
		{name: "valkey 8", info: "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n", version: "7.2.4", ok: true},
		{name: "redis 6.2", info: "redis_version:6.2.14\r\n", version: "6.2.14", ok: false},
		{name: "redis 6.0", info: "redis_version:6.0.20\n", version: "6.0.20", ok: false},
		{name: "redis 5", info: "redis_version:5.0.14\r\n", version: "5.0.14", ok: false},
		{name: "major only", info: "redis_version:7\r\n", version: "7", bad: true},
		{name: "not a number", info: "redis_version:seven.zero\r\n", version: "seven.zero", bad: true},
		{name: "empty", info: "redis_version:\r\n", version: "", bad: true},
		{name: "no version", info: "# Server\r\nredis_mode:standalone\r\n", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := serverVersion(tc.info)
			if err == nil && v != tc.version {
				t.Fatalf("version = %q, want %q", v, tc.version)
			}
			var ok bool
			if err == nil {
				ok, err = versionAtLeast(v, minServerMajor, minServerMinor)
			}
			if tc.bad {
				if err == nil {
					t.Fatalf("version %q accepted, want an error", v)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Fatalf("versionAtLeast(%q, 7.0) = %v, want %v", v, ok, tc.ok)
			}
		})
	}
}

// A node that is too old is named, with its version and the minimum.
func TestCheckNodeTooOld(t *testing.T) {
	t.Parallel()
	err := checkNode("10.0.0.7:6379", "# Server\r\nredis_version:6.2.14\r\n")
	if !errors.Is(err, ErrServerTooOld) {
		t.Fatalf("err = %v, want ErrServerTooOld", err)
	}
	for _, want := range []string{"10.0.0.7:6379", "6.2.14", "7.0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if err := checkNode("10.0.0.8:6379", "redis_version:7.0.15\r\n"); err != nil {
		t.Fatalf("7.0.15: %v", err)
	}
	if err := checkNode("10.0.0.9:6379", "redis_mode:standalone\r\n"); err == nil || errors.Is(err, ErrServerTooOld) {
		t.Fatalf("no version: %v, want an error other than ErrServerTooOld", err)
	}
}

// The test servers (Redis 7.0, single and Cluster) pass CheckServer.
func TestCheckServer(t *testing.T) {
	t.Parallel()
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			c := tp.Client(t)
			if err := CheckServer(context.Background(), c); err != nil {
				t.Fatalf("CheckServer: %v", err)
			}
		})
	}
}
