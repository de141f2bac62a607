package main

import (
	"io"
	"testing"

	"github.com/dibsio/dibs/internal/assembly/service"
)

// TestConfigFileFillsUnsetFlags: addr, redis, db and data_dir from the
// config file apply unless a flag or an environment variable gave them;
// what neither gives keeps the flag's default.
func TestConfigFileFillsUnsetFlags(t *testing.T) {
	t.Setenv("DIBS_DATABASE_URL", "sqlite://env.db")
	f, err := parseServeFlags([]string{"--addr", "127.0.0.1:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := service.Config{Addr: "127.0.0.1:9999", Redis: "redis://file:6379", DB: "postgres://file/db", DataDir: "/file"}
	f.apply(&c)
	if c.Addr != "127.0.0.1:1" || c.Redis != "redis://file:6379" || c.DB != "sqlite://env.db" || c.DataDir != "/file" {
		t.Fatalf("got addr %q redis %q db %q data dir %q", c.Addr, c.Redis, c.DB, c.DataDir)
	}
	c = service.Config{}
	f.apply(&c)
	if c.Redis != "" || c.DataDir != service.DefaultDataDir {
		t.Fatalf("without the file: redis %q data dir %q, want the defaults", c.Redis, c.DataDir)
	}
}
