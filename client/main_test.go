package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/internal/assembly/service"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/testmain"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// webhookSecret signs the test server's webhook calls.
const webhookSecret = "client-test-webhook-secret-0123456789"

// adminToken is the admin token of the test server.
const adminToken = "client-test-admin"

// The test server: one `dibs serve` in this process, shared by every test
// of the binary (its promotions live in the binary's Redis, so a second
// server there would confirm them into another database). Each test uses
// promotion ids of its own.
var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// baseURL starts the test server on first use and returns its URL.
func baseURL(t *testing.T) string {
	t.Helper()
	serverOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dibs-client-test-")
		if err != nil {
			serverErr = err
			return
		}
		cfg := serverConfig(redistest.Single(t).Addr(), dir)
		cfg.Admin.EraseSecret = "client-test-erase-secret"
		cfg.WaitingRoom.TickMS = 50
		svc, err := service.New(cfg)
		if err != nil {
			serverErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := svc.Start(ctx); err != nil {
			serverErr = err
			return
		}
		testmain.RegisterCleanup(func() {
			if err := svc.Stop(context.Background()); err != nil {
				fmt.Fprintf(os.Stderr, "client test server: stop: %v\n", err)
			}
			_ = os.RemoveAll(dir)
		})
		serverURL = "http://" + svc.Addr().String()
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverURL
}

// serverConfig is the configuration of a test server on the Redis at
// redisAddr with its SQLite file in dir.
func serverConfig(redisAddr, dir string) service.Config {
	cfg := service.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Redis = "redis://" + redisAddr
	cfg.DB = "sqlite://" + filepath.Join(dir, "dibs.db")
	cfg.AdminToken = adminToken
	cfg.Issue.WebhookSecret = webhookSecret
	cfg.Instance = "client-test"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// startServer starts a server of the test's own with cfg and returns its
// URL; it is stopped when the test ends.
func startServer(t *testing.T, cfg service.Config) string {
	t.Helper()
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return "http://" + svc.Addr().String()
}

// newClient returns an admin client of the test server whose connections
// are closed when the test ends.
func newClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	return newClientAt(t, baseURL(t), append([]client.Option{client.WithAdminToken(adminToken)}, opts...)...)
}

func newClientAt(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	hc := testHTTPClient(t)
	c, err := client.New(url, append([]client.Option{client.WithHTTPClient(hc)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
