package slackgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/realm-go/realm/notify-svc/slackgate"
	"github.com/realm-go/realm/notify-svc/slackgate/slackstub"
	"github.com/realm-go/realm/pkg/errcode"
)

// A failed Slack call carries the catalogue code of what Slack answered
// (or that it did not), and says whether Slack refused the post outright
// (a retry changes nothing) or may have taken it.
func TestSlackFailuresCarryTheirCodes(t *testing.T) {
	cases := []struct {
		name    string
		fate    slackstub.Fate
		code    errcode.Code
		refused bool
	}{
		{"Slack refuses the post", slackstub.Refuse, errcode.ServiceHTTP4xx, true},
		{"Slack answers 503", slackstub.Unavailable, errcode.ServiceHTTP5xx, false},
		{"no answer at all", slackstub.Drop, errcode.NetworkUnreachable, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := slackstub.Start(t)
			s.SetFate(func(slackstub.Post) slackstub.Fate { return c.fate })
			err := slackgate.NewBot("xoxb-test", "C0GATES", s.APIURL()).Reply(context.Background(), "1.1", "hi")
			if errcode.CodeOf(err) != c.code || slackgate.Refused(err) != c.refused {
				t.Errorf("err %v: code %q, refused %v; want %q, %v", err, errcode.CodeOf(err), slackgate.Refused(err), c.code, c.refused)
			}
		})
	}
	t.Run("reading without the history scope", func(t *testing.T) {
		s := slackstub.Start(t)
		s.DenyReads("missing_scope")
		bot := slackgate.NewBot("xoxb-test", "C0GATES", s.APIURL())
		_, err := bot.FindGate(context.Background(), slackgate.Gate{RunID: "r", GateID: "g"}, time.Now())
		_, err2 := bot.Replies(context.Background(), "1.1")
		for _, err := range []error{err, err2} {
			if !errors.Is(err, slackgate.ErrNoHistory) || errcode.CodeOf(err) != errcode.ServiceAuthFailed {
				t.Errorf("err %v: want ErrNoHistory with SERVICE_AUTH_FAILED", err)
			}
		}
	})
}
