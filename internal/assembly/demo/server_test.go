package demo

import (
	"fmt"
	"testing"
)

func TestServerEnv(t *testing.T) {
	t.Parallel()
	env := ServerEnv([]string{
		"PATH=/usr/bin", "DIBS_REDIS_URL=redis://elsewhere:6379", "DIBS_DATABASE_URL=postgres://x",
		"DIBS_ADDR=0.0.0.0:80", "DIBS_ADMIN_TOKEN=t", "DIBS_CONFIG=/etc/dibs.yaml", "DIBS_DATA_DIR=/var/lib/dibs",
		"DIBS_LOG_FORMAT=json", "HOME=/root",
	}, "/tmp/d")
	want := []string{"PATH=/usr/bin", "DIBS_LOG_FORMAT=json", "HOME=/root", "DIBS_DATA_DIR=/tmp/d"}
	if fmt.Sprint(env) != fmt.Sprint(want) {
		t.Fatalf("env = %v, want %v", env, want)
	}
}
