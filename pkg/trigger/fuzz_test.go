package trigger

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var fuzzNow = time.Unix(1_800_000_000, 0)

// fuzzAuth is one of the schemes, picked by n.
func fuzzAuth(n uint8) Auth {
	algs, encs := []string{"sha1", "sha256", "sha512"}, []string{"hex", "base64"}
	switch n % 6 {
	case 0:
		return Auth{Mode: ModeNone}
	case 1:
		return Auth{Mode: ModeSharedSecret, Header: "X-Token"}
	case 2:
		return Auth{Mode: ModeGitHub}
	case 3:
		return Auth{Mode: ModeStripe, MaxAge: time.Duration(n/6) * time.Second}
	case 4:
		return Auth{Mode: ModeHMAC, Header: "X-Sig", Algorithm: algs[n/6%3], Encoding: encs[n/18%2]}
	}
	return Auth{Mode: ModeHMAC, Header: "X-Sig", Algorithm: algs[n/6%3], Encoding: encs[n/18%2], TimestampHeader: "x-ts"}
}

// fuzzRequest carries sig in a's security header and ts where a reads it.
func fuzzRequest(a Auth, sig, ts string) *Request {
	h := http.Header{}
	switch a.Mode {
	case ModeStripe:
		h.Set("Stripe-Signature", "t="+ts+","+sig)
	case ModeGitHub:
		h.Set("X-Hub-Signature-256", sig)
		h.Set("X-GitHub-Delivery", ts)
	default:
		if hd := a.SecurityHeader(); hd != "" {
			h.Set(hd, sig)
		}
		h.Set("X-Ts", ts)
	}
	return NewRequest(h, nil)
}

// fuzzSign is what an honest sender puts in the security header,
// written from the schemes' own documentation rather than verify.go.
func fuzzSign(a Auth, secret, body []byte, ts string) string {
	m := func(h func() hash.Hash, msg []byte) []byte {
		x := hmac.New(h, secret)
		x.Write(msg)
		return x.Sum(nil)
	}
	switch a.Mode {
	case ModeSharedSecret:
		return string(secret)
	case ModeGitHub:
		return "sha256=" + hex.EncodeToString(m(sha256.New, body))
	case ModeStripe:
		return "v1=" + hex.EncodeToString(m(sha256.New, []byte(ts+"."+string(body))))
	case ModeHMAC:
		h := map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}[a.Algorithm]
		msg := body
		if a.TimestampHeader != "" {
			msg = []byte(ts + "." + string(body))
		}
		if a.Encoding == "base64" {
			return base64.StdEncoding.EncodeToString(m(h, msg))
		}
		return hex.EncodeToString(m(h, msg))
	}
	return ""
}

// FuzzVerify: no input makes the verifier panic; an honest request is
// verified and named against replays; anything verified stops being so
// when its body changes, or (timed schemes) when its time is out of
// tolerance either way.
func FuzzVerify(f *testing.F) {
	f.Add(uint8(2), "sha256=00", "guid", []byte(`{"action":"opened"}`), []byte("gh-secret"))
	f.Add(uint8(3), "v1=deadbeef,v0=x", "1800000000", []byte(`{"id":"evt_1"}`), []byte("whsec"))
	f.Add(uint8(5), "", "-9223372036854775808", []byte{}, []byte("k"))
	f.Fuzz(func(t *testing.T, mode uint8, sig, ts string, body, secret []byte) {
		a := fuzzAuth(mode)
		req := fuzzRequest(a, sig, ts)
		rep, ok := a.Verify(req, body, secret, fuzzNow)
		timed := a.Mode == ModeStripe || (a.Mode == ModeHMAC && a.TimestampHeader != "")
		if ok && (timed || a.Mode == ModeGitHub) && (rep.Key == "" || rep.Window <= 0) {
			t.Fatalf("%+v verified with no replay key: %+v", a, rep)
		}
		if ok && a.Mode != ModeNone && a.Mode != ModeSharedSecret {
			if _, again := a.Verify(fuzzRequest(a, sig, ts), append(append([]byte{}, body...), 'x'), secret, fuzzNow); again {
				t.Fatalf("%+v: a changed body still verified", a)
			}
		}
		if len(secret) == 0 || strings.ContainsAny(string(secret), "\r\n\x00") || a.Mode == ModeNone {
			return
		}
		now := strconv.FormatInt(fuzzNow.Unix(), 10)
		good := fuzzSign(a, secret, body, now)
		if a.Mode == ModeSharedSecret && strings.TrimSpace(good) != good {
			return // a header value loses its outer spaces on the wire
		}
		honest, ok := a.Verify(fuzzRequest(a, good, now), body, secret, fuzzNow)
		if !ok {
			t.Fatalf("%+v: an honest request was refused", a)
		}
		if _, again := a.Verify(fuzzRequest(a, good, now), body, secret, fuzzNow); !again || honest.Key == "" && timed {
			t.Fatalf("%+v: verification is not repeatable or names no replay", a)
		}
		if timed {
			for _, skew := range []time.Duration{a.tolerance() + time.Second, -a.tolerance() - time.Second} {
				at := strconv.FormatInt(fuzzNow.Add(skew).Unix(), 10)
				if _, ok := a.Verify(fuzzRequest(a, fuzzSign(a, secret, body, at), at), body, secret, fuzzNow); ok {
					t.Fatalf("%+v: a timestamp %v off was accepted", a, skew)
				}
			}
		}
	})
}

// FuzzParse: no block makes the parser panic, a refusal speaks of the
// trigger, and what it accepts keeps the block's limits.
func FuzzParse(f *testing.F) {
	f.Add(`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"per_second":0.5,"burst":2}}`)
	f.Add(`{"type":"webhook","auth":{"mode":"hmac","header":"X-Sig","secret_from":"S","timestamp_header":"X-Ts","max_age_seconds":60},"dedup":{"id_from":"body.id","ttl_minutes":5}}`)
	f.Add(`{"type":"webhook","auth":{"mode":"stripe","secret_from":"S"},"filter":{"path":"body.type","value":["a","b"]},"params_map":{"a":"body.a"},"rate_limit":false}`)
	f.Fuzz(func(t *testing.T, text string) {
		var block map[string]any
		if json.Unmarshal([]byte(text), &block) != nil {
			return
		}
		tr, err := Parse(block)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "trigger") {
				t.Fatalf("refusal %q does not name the trigger", err)
			}
			return
		}
		switch tr.Auth.Mode {
		case ModeSharedSecret, ModeGitHub, ModeStripe, ModeHMAC, ModeNone:
		default:
			t.Fatalf("mode %q accepted", tr.Auth.Mode)
		}
		if rl := tr.RateLimit; rl != nil && !rl.Off && (rl.PerSecond <= 0 || rl.PerSecond > MaxPerSecond || rl.Burst < 1 || rl.Burst > MaxPerSecond) {
			t.Fatalf("rate limit %+v accepted", rl)
		}
		if len(tr.Filter) > MaxConditions {
			t.Fatalf("%d conditions accepted", len(tr.Filter))
		}
		for _, c := range tr.Filter {
			if (c.Path == "") == (c.Header == "") || len(c.Values) == 0 {
				t.Fatalf("condition %+v accepted", c)
			}
		}
		if d := tr.Dedup; d != nil && (d.TTL < time.Minute || d.TTL > MaxTTLMinutes*time.Minute || d.IDFrom == "") {
			t.Fatalf("dedup %+v accepted", d)
		}
		if tr.Auth.MaxAge < 0 {
			t.Fatalf("max age %v accepted", tr.Auth.MaxAge)
		}
	})
}
