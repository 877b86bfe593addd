package trigger

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"time"
)

// Verify reports whether the request carries a valid proof for the mode
// (spec §6). secret is the value of secret_from read at startup; body is
// the raw body bytes; now is the clock for max_age_seconds. Any missing or
// malformed input is "not verified"; comparisons are constant-time.
func (a Auth) Verify(r *Request, body []byte, secret []byte, now time.Time) bool {
	switch a.Mode {
	case ModeNone:
		return true
	case ModeSharedSecret:
		got, ok := r.Header(a.Header)
		return ok && got != "" && len(secret) > 0 && equal(got, string(secret))
	case ModeGitHub:
		got, ok := r.Header("X-Hub-Signature-256")
		sig, found := strings.CutPrefix(got, "sha256=")
		if !ok || !found {
			return false
		}
		return equal(sig, hex.EncodeToString(mac(sha256.New, secret, body)))
	case ModeStripe:
		return a.verifyStripe(r, body, secret, now)
	case ModeHMAC:
		return a.verifyHMAC(r, body, secret, now)
	}
	return false
}

func (a Auth) verifyStripe(r *Request, body, secret []byte, now time.Time) bool {
	got, ok := r.Header("Stripe-Signature")
	if !ok {
		return false
	}
	var ts string
	var sigs []string
	for _, item := range strings.Split(got, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(item), "=")
		if !found {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return false
	}
	signed := append([]byte(ts+"."), body...)
	want := hex.EncodeToString(mac(sha256.New, secret, signed))
	matched := false
	for _, s := range sigs {
		// Every candidate is compared, so timing does not say which matched.
		if equal(s, want) {
			matched = true
		}
	}
	if !matched {
		return false
	}
	return a.MaxAge == 0 || fresh(ts, a.MaxAge, now)
}

func (a Auth) verifyHMAC(r *Request, body, secret []byte, now time.Time) bool {
	got, ok := r.Header(a.Header)
	if !ok || got == "" {
		return false
	}
	var h func() hash.Hash
	switch a.Algorithm {
	case "sha1":
		h = sha1.New
	case "sha512":
		h = sha512.New
	default:
		h = sha256.New
	}
	sum := mac(h, secret, body)
	want := hex.EncodeToString(sum)
	if a.Encoding == "base64" {
		want = base64.StdEncoding.EncodeToString(sum)
	}
	if !equal(got, want) {
		return false
	}
	if a.TimestampHeader == "" {
		return true // max_age_seconds alone has nothing to check (spec §12.3)
	}
	ts, ok := r.Header(a.TimestampHeader)
	if !ok {
		return false
	}
	return a.MaxAge == 0 || fresh(ts, a.MaxAge, now)
}

// fresh reports whether the Unix-seconds text ts is at most maxAge old.
// Timestamps in the future are accepted, as in the original.
func fresh(ts string, maxAge time.Duration, now time.Time) bool {
	n, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return false
	}
	return now.Unix()-n <= int64(maxAge/time.Second)
}

func mac(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// equal compares two texts in constant time, lengths included: both are
// hashed first, so a wrong length takes as long as a wrong byte.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return hmac.Equal(ha[:], hb[:])
}
