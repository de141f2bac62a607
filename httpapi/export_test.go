package httpapi

import (
	"context"
	"time"

	"github.com/dibsio/dibs/httpapi/ui"
)

// SetKeyedHook makes s call f once a keyed admin request holds its
// Idempotency-Key record, before its handler runs.
func SetKeyedHook(s *Server, f func()) { s.idem.testHookKeyed = f }

// IssueLags sets the IssueLagSeconds of ps as the dashboard reads them.
func IssueLags(s *Server, ctx context.Context, ps []ui.Promotion, segments []int, now time.Time) {
	src := &uiSource{manager: s.cfg.Manager, redis: s.cfg.Redis, prefix: s.cfg.KeyPrefix}
	src.issueLags(ctx, ps, segments, now)
}
