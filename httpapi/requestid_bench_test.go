package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkRequestID measures what the request id adds to every request:
// reading or making the id, the answer header, the request's context (the
// answerWriter that holds them included).
func BenchmarkRequestID(b *testing.B) {
	for _, tc := range []struct{ name, id string }{{"made", ""}, {"caller's", "order-42-retry-1"}} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/v1/promotions/p/claims", nil)
			if tc.id != "" {
				r.Header.Set(RequestIDHeader, tc.id)
			}
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				_ = withRequestID(&answerWriter{ResponseWriter: w}, r)
			}
		})
	}
}
