package errcode

import "net/http"

// ForHTTPStatus is the catalogue code of a service's failing HTTP status
// (spec §13.4): 401 auth, 404 not found, 429 rate limited, other 4xx and
// 5xx by class; failed is false below 400. The mock adapter and `realm
// workflow test`'s mocked services fail a step with it, as a real
// adapter would for that answer.
func ForHTTPStatus(status int) (code Code, failed bool) {
	switch {
	case status < 400:
		return "", false
	case status == http.StatusUnauthorized:
		return ServiceAuthFailed, true
	case status == http.StatusNotFound:
		return ServiceNotFound, true
	case status == http.StatusTooManyRequests:
		return ServiceRateLimited, true
	case status < 500:
		return ServiceHTTP4xx, true
	}
	return ServiceHTTP5xx, true
}
