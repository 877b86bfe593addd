package notifier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// maxNudges is how many times a gate's thread is told the choices after
// a reply that names none.
const maxNudges = 2

// SeenEvent remembers a Slack event id for an hour and reports whether it
// was already there: Slack retries an event, possibly to another replica.
func (n *Notifier) SeenEvent(ctx context.Context, id string) (bool, error) {
	fresh, err := n.q.rc.SetNX(ctx, n.q.tag+"event:"+id, 1, time.Hour).Result()
	return !fresh, err
}

// Reply handles a person's message in a thread: a choice of the gate
// there (trimmed, any case) is recorded through the engine, with no
// responded_by and no claim token; anything else is answered with the
// choices, at most twice a gate. The resolution is posted by the
// resolution job, as for an answer from any other door.
func (n *Notifier) Reply(ctx context.Context, threadTS, text string) error {
	key, err := n.q.rc.HGet(ctx, n.q.threads, threadTS).Result()
	if errors.Is(err, redis.Nil) {
		return nil // not a gate's thread
	}
	if err != nil {
		return err
	}
	rec, err := n.q.record(ctx, key)
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	var r record
	if err := jsonUnmarshal(rec, &r); err != nil {
		return err
	}
	choice := ""
	for _, c := range r.Choices {
		if strings.EqualFold(strings.TrimSpace(text), c) {
			choice = c
			break
		}
	}
	if choice == "" {
		nudges, err := n.q.rc.HIncrBy(ctx, n.q.nudge, key, 1).Result()
		if err != nil || nudges > maxNudges {
			return err
		}
		return n.o.Poster.Reply(ctx, threadTS, "Please reply with one of: "+strings.Join(r.Choices, ", "))
	}
	resp, err := n.o.Engine.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{RunId: r.Run, GateId: r.GateID, Choice: choice})
	reply := resp.GetReply()
	switch {
	case err != nil:
		return n.couldNot(ctx, threadTS, err.Error())
	case reply.AnswerRecorded != nil && !reply.GetAnswerRecorded():
		// Too late: the engine's own late-answer sentences (mcp-and-gates §9.8).
		lines := append([]string{}, reply.GetErrors()...)
		if len(lines) == 0 && reply.GetContextHint() != "" {
			lines = append(lines, reply.GetContextHint())
		}
		return n.o.Poster.Reply(ctx, threadTS, strings.Join(lines, "\n"))
	case reply.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK:
		detail := reply.GetContextHint()
		if len(reply.GetErrors()) > 0 {
			detail = reply.GetErrors()[0]
		}
		return n.couldNot(ctx, threadTS, detail)
	}
	return nil
}

func (n *Notifier) couldNot(ctx context.Context, ts, detail string) error {
	return n.o.Poster.Reply(ctx, ts, fmt.Sprintf("⚠️ Couldn't record your response (`%s`). Try again, or use the terminal command shown above.", detail))
}
