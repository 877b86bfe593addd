package errcode

import "testing"

func TestForHTTPStatusClassifiesAFailingAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   Code
		failed bool
	}{
		{200, "", false}, {302, "", false}, {401, ServiceAuthFailed, true}, {404, ServiceNotFound, true},
		{429, ServiceRateLimited, true}, {422, ServiceHTTP4xx, true}, {500, ServiceHTTP5xx, true}, {503, ServiceHTTP5xx, true},
	}
	for _, tt := range tests {
		if got, failed := ForHTTPStatus(tt.status); got != tt.want || failed != tt.failed {
			t.Errorf("ForHTTPStatus(%d) = %s, %v; want %s, %v", tt.status, got, failed, tt.want, tt.failed)
		}
	}
}
