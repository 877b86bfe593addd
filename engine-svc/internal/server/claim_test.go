package server_test

import (
	"strings"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// attended is a workflow whose first step a person answers at a prompt.
const attended = "id: attended\nname: Attended\nversion: 1\nsteps:\n" +
	"  draft:\n    description: Draft.\n    execution: agent\n    output_schema:\n      type: object\n      required: [reply]\n      properties:\n        reply: { type: string }\n" +
	"  after:\n    description: After.\n    execution: agent\n    depends_on: [draft]\n"

var (
	attendant = &realmv1.Caller{By: "dev-tester", BySource: "ambient", Channel: realmv1.Channel_CHANNEL_RUN}
	otherBot  = &realmv1.Caller{By: "other-bot", BySource: "ambient", Channel: realmv1.Channel_CHANNEL_AGENT}
)

const inFlightSentence = "Step 'draft' cannot be called now: it is in flight (claimed by another call)."

// claimDraft starts a run of attended and claims draft for the attendant.
func claimDraft(t *testing.T, e *env) (run, token string) {
	t.Helper()
	e.register(t, []byte(attended))
	run = start(t, e, "attended", nil).GetRunId()
	resp, err := e.client.ClaimStep(ctx(t), &realmv1.ClaimStepRequest{RunId: run, Step: "draft", Caller: attendant})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || resp.GetClaimToken() == "" {
		t.Fatalf("claim_step: %v %q, token %q", resp.GetReply().GetStatus(), resp.GetReply().GetContextHint(), resp.GetClaimToken())
	}
	return run, resp.GetClaimToken()
}

func answer(t *testing.T, e *env, run string, caller *realmv1.Caller, token *string, p map[string]any) *realmv1.Reply {
	t.Helper()
	resp, err := e.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft", Params: params(t, p), Caller: caller, ClaimToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetReply()
}

func TestClaimStepHoldsTheStepWithNoDeadline(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, _ := claimDraft(t, e)
		doc := loadDoc(t, e, run)
		c := doc.Claims["draft"]
		if c == nil || c.Deadline != nil || c.Holder == nil || c.Holder.By != "dev-tester" || c.Holder.Channel != "run" || c.Since == "" {
			t.Fatalf("claim = %+v, want one by dev-tester via run, with a since and no deadline", c)
		}
		s := state(t, e, run)
		if len(s.GetInProgressSteps()) != 1 || len(s.GetNextActions()) != 0 {
			t.Errorf("in progress %v, next_actions %v; want draft and nothing to call", s.GetInProgressSteps(), actionTools(s))
		}
		wantStatus(t, s, "claim_unknown_age")
		wantLabel(t, e, run, "draft=claim_unknown_age")
		// A second claim, by anyone, is refused.
		again, err := e.client.ClaimStep(ctx(t), &realmv1.ClaimStepRequest{RunId: run, Step: "draft", Caller: otherBot})
		if err != nil {
			t.Fatal(err)
		}
		if again.GetClaimToken() != "" || !strings.HasPrefix(again.GetReply().GetContextHint(), inFlightSentence) {
			t.Errorf("second claim: token %q, hint %q", again.GetClaimToken(), again.GetReply().GetContextHint())
		}
	})
}

func TestClaimStepRefusesWhatCannotBeClaimed(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(attended))
		run := start(t, e, "attended", nil).GetRunId()
		cases := []struct{ name, step, want string }{
			{"a step not ready", "after", "Step 'after' cannot be called now: its dependencies are not settled: 'draft'."},
			{"a step not in the workflow", "nope", "Step 'nope' cannot be called now: step 'nope' is not in workflow 'attended'."},
		}
		for _, c := range cases {
			resp, err := e.client.ClaimStep(ctx(t), &realmv1.ClaimStepRequest{RunId: run, Step: c.step, Caller: attendant})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetClaimToken() != "" || resp.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED || !strings.HasPrefix(resp.GetReply().GetContextHint(), c.want) {
				t.Errorf("%s: token %q, %v %q; want blocked %q", c.name, resp.GetClaimToken(), resp.GetReply().GetStatus(), resp.GetReply().GetContextHint(), c.want)
			}
		}
		if v := loadDoc(t, e, run).Version; v != 0 {
			t.Errorf("refused claims wrote the run: version %d", v)
		}
	})
}

func TestTheHolderAnswersWithItsClaimAndOthersAreRefused(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, token := claimDraft(t, e)
		wrong := "not-the-token"
		for _, c := range []struct {
			name   string
			caller *realmv1.Caller
			token  *string
		}{{"another caller with no token", otherBot, nil}, {"another caller with a wrong token", otherBot, &wrong}, {"the holder without its token", attendant, nil}} {
			r := answer(t, e, run, c.caller, c.token, map[string]any{"reply": "x"})
			if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED || !strings.HasPrefix(r.GetContextHint(), inFlightSentence) {
				t.Errorf("%s: %v %q, want blocked %q", c.name, r.GetStatus(), r.GetContextHint(), inFlightSentence)
			}
		}
		// A refused answer under the claim keeps it: the person types again.
		if r := answer(t, e, run, attendant, &token, map[string]any{"reply": 1}); r.GetErrorCode() != "VALIDATION_OUTPUT_SCHEMA" {
			t.Fatalf("schema refusal: %v %q", r.GetErrorCode(), r.GetContextHint())
		}
		if c := loadDoc(t, e, run).Claims["draft"]; c == nil || c.Token != token {
			t.Fatalf("after a refused answer the claim is %+v, want still %s", c, token)
		}
		r := answer(t, e, run, attendant, &token, map[string]any{"reply": "Sorry."})
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("holder's answer: %v %q", r.GetStatus(), r.GetContextHint())
		}
		doc := loadDoc(t, e, run)
		if _, held := doc.Claims["draft"]; held || len(doc.CompletedSteps) != 1 {
			t.Errorf("after the answer: claims %v, completed %v; want no claim and draft completed", doc.Claims, doc.CompletedSteps)
		}
		// The token is spent: releasing it changes nothing.
		rel, err := e.client.ReleaseClaim(ctx(t), &realmv1.ReleaseClaimRequest{RunId: run, Step: "draft", ClaimToken: token, Caller: attendant})
		if err != nil || rel.GetReleased() {
			t.Errorf("release after the answer: %v released=%v", err, rel.GetReleased())
		}
	})
}

func TestReleaseClaimFreesTheStepOnlyWithItsToken(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, token := claimDraft(t, e)
		rel, err := e.client.ReleaseClaim(ctx(t), &realmv1.ReleaseClaimRequest{RunId: run, Step: "draft", ClaimToken: "not-the-token", Caller: otherBot})
		if err != nil || rel.GetReleased() {
			t.Fatalf("release with a wrong token: %v released=%v", err, rel.GetReleased())
		}
		if loadDoc(t, e, run).Claims["draft"] == nil {
			t.Fatal("a wrong token released the claim")
		}
		rel, err = e.client.ReleaseClaim(ctx(t), &realmv1.ReleaseClaimRequest{RunId: run, Step: "draft", ClaimToken: token, Caller: attendant})
		if err != nil || !rel.GetReleased() {
			t.Fatalf("release with the token: %v released=%v %q", err, rel.GetReleased(), rel.GetReply().GetContextHint())
		}
		s := state(t, e, run)
		if len(s.GetInProgressSteps()) != 0 || len(tools(&realmv1.Reply{NextActions: s.GetNextActions()})) == 0 {
			t.Errorf("after release: in progress %v, next_actions %v; want draft offered again", s.GetInProgressSteps(), actionTools(s))
		}
		if _, stuck := stuckList(t, e, 24*time.Hour)[run]; stuck {
			t.Error("a released claim is still listed as stuck")
		}
		// Another driver may now do the step; the old token answers nothing.
		if r := answer(t, e, run, attendant, &token, map[string]any{"reply": "late"}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED ||
			!strings.HasPrefix(r.GetContextHint(), "Step 'draft' cannot be called now: the claim this call held on it was removed by another process") {
			t.Errorf("answer with a released token: %v %q", r.GetStatus(), r.GetContextHint())
		}
		if r := answer(t, e, run, otherBot, nil, map[string]any{"reply": "From elsewhere."}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Errorf("another driver after release: %v %q", r.GetStatus(), r.GetContextHint())
		}
	})
}

func TestReclaimFreesTheClaimOfAHolderThatDied(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, token := claimDraft(t, e)
		// The holder is gone (SIGKILL): nothing releases its claim.
		resp, err := e.client.ReclaimRun(ctx(t), &realmv1.ReclaimRunRequest{RunId: run, Step: "draft", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.GetReply().GetContextHint(), "Reclaimed 'draft' (was claim_unknown_age).") {
			t.Fatalf("reclaim: %q", resp.GetReply().GetContextHint())
		}
		if r := answer(t, e, run, attendant, &token, map[string]any{"reply": "late"}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED {
			t.Errorf("the dead holder's token answered after reclaim: %v %q", r.GetStatus(), r.GetContextHint())
		}
		if r := answer(t, e, run, otherBot, nil, map[string]any{"reply": "Done."}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Errorf("another driver after reclaim: %v %q", r.GetStatus(), r.GetContextHint())
		}
	})
}

func TestTheExpiryTimerEnactsOnlyAnExpiredQuestion(t *testing.T) {
	t.Parallel()
	yaml := "id: timed\nname: Timed\nversion: 1\nsteps:\n" +
		"  approve:\n    description: Approve.\n    execution: auto\n    trust: human_confirmed\n    gate:\n      choices: [ship, hold]\n      timeout_seconds: 60\n      on_expiry: settle_default\n      default_choice: hold\n"
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(yaml))
		run := start(t, e, "timed", nil).GetRunId()
		timer := func() *realmv1.Reply {
			resp, err := e.client.AdvanceRun(ctx(t), &realmv1.AdvanceRunRequest{RunId: run, Caller: attendant, ExpiryTimer: true})
			if err != nil {
				t.Fatal(err)
			}
			return resp.GetReply()
		}
		before := loadDoc(t, e, run)
		if before.PendingGate == nil {
			t.Fatalf("no open question: %+v", before)
		}
		if via := timer().ExpiryEnactedVia; via != nil {
			t.Errorf("expiry_enacted_via = %q before the question's time was up", *via)
		}
		if v := loadDoc(t, e, run).Version; v != before.Version {
			t.Fatalf("the timer wrote the run before the question's time was up: version %d → %d", before.Version, v)
		}
		e.clock.Advance(61 * time.Second)
		r := timer()
		if len(r.GetWarnings()) != 1 || !strings.HasSuffix(r.GetWarnings()[0], "(enacted_via: timer).") {
			t.Errorf("warnings = %q, want the expiry enacted via timer", r.GetWarnings())
		}
		if r.GetExpiryEnactedVia() != "timer" {
			t.Errorf("expiry_enacted_via = %q, want timer", r.GetExpiryEnactedVia())
		}
		g := loadDoc(t, e, run).ResolvedGates[before.PendingGate.GateID]
		if g == nil || g.EnactedVia != "timer" || g.ResolvedBy != "timeout" || g.Choice != "hold" {
			t.Errorf("resolved gate = %+v, want hold by timeout, enacted via timer", g)
		}
	})
}
