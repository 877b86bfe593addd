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

// DefaultTolerance is how far a signed timestamp may be from now, either
// way, when max_age_seconds is not set (Stripe's own libraries use 5 min).
const DefaultTolerance = 5 * time.Minute

// GitHubReplayWindow is how long a GitHub delivery id is remembered when
// the trigger's dedup does not remember it longer: GitHub signs no
// timestamp, so a captured delivery is otherwise good forever.
const GitHubReplayWindow = time.Duration(DefaultTTLMinutes) * time.Minute

// Replay names one verified request for replay protection: the listener
// remembers Key for Window and refuses the same Key again meanwhile. The
// zero Replay (shared_secret, hmac without timestamp_header, none) is not
// remembered: nothing in those requests tells a replay from a new one.
type Replay struct {
	Key    string
	Window time.Duration
}

// Verify reports whether the request carries a valid proof for the mode
// (spec §6), and what names it against replays. secret is the value of
// secret_from read at startup; body is the raw body bytes; now is the
// clock for timestamps. Any missing or malformed input is "not verified";
// comparisons are constant-time.
func (a Auth) Verify(r *Request, body []byte, secret []byte, now time.Time) (Replay, bool) {
	switch a.Mode {
	case ModeNone:
		return Replay{}, true
	case ModeSharedSecret:
		got, ok := r.Header(a.Header)
		return Replay{}, ok && got != "" && len(secret) > 0 && equal(got, string(secret))
	case ModeGitHub:
		got, ok := r.Header("X-Hub-Signature-256")
		sig, found := strings.CutPrefix(got, "sha256=")
		if !ok || !found || !equal(sig, hex.EncodeToString(mac(sha256.New, secret, body))) {
			return Replay{}, false
		}
		// GitHub's X-GitHub-Delivery id is not signed, so a replay could
		// carry a fresh one: the signature (of the body) is what every
		// copy of the same signed delivery repeats, so it is the key.
		return Replay{Key: "github:" + sig, Window: GitHubReplayWindow}, true
	case ModeStripe:
		return a.verifyStripe(r, body, secret, now)
	case ModeHMAC:
		return a.verifyHMAC(r, body, secret, now)
	}
	return Replay{}, false
}

// tolerance is max_age_seconds, or DefaultTolerance.
func (a Auth) tolerance() time.Duration {
	if a.MaxAge > 0 {
		return a.MaxAge
	}
	return DefaultTolerance
}

// timed is the Replay of a request whose signature covers its timestamp:
// the signature is valid for tolerance either side of ts, so remembering
// it for twice the tolerance outlives every moment it could be accepted.
func (a Auth) timed(sig string) Replay {
	return Replay{Key: a.Mode + ":" + sig, Window: 2 * a.tolerance()}
}

func (a Auth) verifyStripe(r *Request, body, secret []byte, now time.Time) (Replay, bool) {
	got, ok := r.Header("Stripe-Signature")
	if !ok {
		return Replay{}, false
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
		return Replay{}, false
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
	if !matched || !fresh(ts, a.tolerance(), now) {
		return Replay{}, false
	}
	return a.timed(want), true
}

func (a Auth) verifyHMAC(r *Request, body, secret []byte, now time.Time) (Replay, bool) {
	got, ok := r.Header(a.Header)
	if !ok || got == "" {
		return Replay{}, false
	}
	var ts string
	if a.TimestampHeader != "" {
		if ts, ok = r.Header(a.TimestampHeader); !ok {
			return Replay{}, false
		}
		// The timestamp is signed with the body (`<timestamp>.<body>`, as
		// Stripe does): otherwise a captured request replays with a fresh
		// timestamp.
		body = append([]byte(ts+"."), body...)
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
		return Replay{}, false
	}
	if a.TimestampHeader == "" {
		return Replay{}, true // max_age_seconds alone has nothing to check (spec §12.3)
	}
	if !fresh(ts, a.tolerance(), now) {
		return Replay{}, false
	}
	return a.timed(want), true
}

// fresh reports whether the Unix-seconds text ts is within tol of now,
// either way: a timestamp far in the future would otherwise make a
// captured request good for as long.
func fresh(ts string, tol time.Duration, now time.Time) bool {
	n, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return false
	}
	d := now.Unix() - n
	lim := int64(tol / time.Second)
	return d <= lim && d >= -lim
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
