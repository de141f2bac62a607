package httpapi

import (
	"context"
	"time"

	"github.com/dibsio/dibs/httpapi/ui"
)

// SetKeyedHook makes s call f once a keyed admin request holds its
// Idempotency-Key record, before its handler runs.
func SetKeyedHook(s *Server, f func()) { s.testHookKeyed = f }

// IssueLags sets the IssueLagSeconds of ps as the dashboard reads them.
func IssueLags(s *Server, ctx context.Context, ps []ui.Promotion, segments []int, now time.Time) {
	s.issueLags(ctx, ps, segments, now)
}
