package web

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/realm-go/realm/console-svc/identity"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

var funcs = template.FuncMap{
	"phase": phaseName,
	"when": func(ts *timestamppb.Timestamp) string {
		if ts == nil || (ts.GetSeconds() == 0 && ts.GetNanos() == 0) {
			return ""
		}
		return ts.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	},
	"json": func(v any) string {
		if m, ok := v.(interface{ AsInterface() any }); ok {
			v = m.AsInterface()
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	},
}

// phaseName is the phase as the CLI writes it (gate_waiting).
func phaseName(p realmv1.RunPhase) string {
	if p == realmv1.RunPhase_RUN_PHASE_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(p.String(), "RUN_PHASE_"))
}

// phases are the filter's choices.
var phases = []string{"running", "gate_waiting", "completed", "failed", "aborted", "abandoned"}

func parsePhase(s string) (realmv1.RunPhase, bool) {
	if s == "" {
		return realmv1.RunPhase_RUN_PHASE_UNSPECIFIED, true
	}
	v, ok := realmv1.RunPhase_value["RUN_PHASE_"+strings.ToUpper(s)]
	return realmv1.RunPhase(v), ok && v != 0
}

type runsData struct {
	Workflow, Phase string
	Stuck           bool
	Phases          []string
	Runs            []*realmv1.RunSummary
	Next            string
	Threshold       int64
}

// runs is the runs list: one ListRuns page, newest first, the engine
// reading its run index (or, for stuck, its timer indexes) a page at a time.
func (s *Server) runs(w http.ResponseWriter, r *http.Request, p identity.Person) {
	q := r.URL.Query()
	d := runsData{Workflow: strings.TrimSpace(q.Get("workflow")), Phase: q.Get("phase"), Stuck: q.Get("stuck") == "1", Phases: phases}
	pg := page{Title: "Runs", Person: p, Data: &d}
	ph, ok := parsePhase(d.Phase)
	if !ok {
		pg.Error = fmt.Sprintf("Phase %q is not one of %s.", d.Phase, strings.Join(phases, ", "))
		s.render(w, http.StatusBadRequest, "runs", pg)
		return
	}
	ctx, cancel := s.call(r)
	defer cancel()
	resp, err := s.o.Engine.ListRuns(ctx, &realmv1.ListRunsRequest{WorkflowId: d.Workflow, Phase: ph, Stuck: d.Stuck, Limit: s.o.PageSize, PageToken: q.Get("page")})
	if err != nil {
		pg.Error = "The engine did not list the runs: " + grpcMessage(err)
		s.render(w, http.StatusBadGateway, "runs", pg)
		return
	}
	d.Runs, d.Threshold = resp.GetRuns(), resp.GetThresholdSeconds()
	if t := resp.GetNextPageToken(); t != "" {
		nq := url.Values{"page": {t}}
		for _, k := range []string{"workflow", "phase", "stuck"} {
			if v := q.Get(k); v != "" {
				nq.Set(k, v)
			}
		}
		d.Next = "/runs?" + nq.Encode()
	}
	s.render(w, http.StatusOK, "runs", pg)
}

type stepRow struct{ Name, State string }

type finding struct {
	Kind, Step, Reason, Since string
	Evidence                  any
}

type runData struct {
	State     *realmv1.RunState
	Steps     []stepRow
	Findings  []finding
	Timeline  string
	Gate      *gateView
	Resume    string
	CanAct    bool
	Actions   []*realmv1.NextAction
	Warnings  []string
	ExtraJSON any
}

// run is one run's page: its steps, health findings and their way out, the
// evidence timeline (inspect's text, which carries no secrets), the open
// gate and the acts.
func (s *Server) run(w http.ResponseWriter, r *http.Request, p identity.Person) {
	id := r.PathValue("run")
	pg := page{Title: "Run " + id, Person: p, Events: "run=" + url.QueryEscape(id), Notice: r.URL.Query().Get("notice"), Error: r.URL.Query().Get("refused")}
	d, code, msg := s.loadRun(r, id, p)
	if msg != "" {
		pg.Error = msg
		pg.Events = ""
		s.render(w, code, "run", pg)
		return
	}
	pg.Data = d
	s.render(w, http.StatusOK, "run", pg)
}

func (s *Server) loadRun(r *http.Request, id string, p identity.Person) (*runData, int, string) {
	ctx, cancel := s.call(r)
	defer cancel()
	st, err := s.o.Engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: id, IncludeSteps: true})
	if err != nil {
		return nil, http.StatusBadGateway, "The engine did not read the run: " + grpcMessage(err)
	}
	if ref := st.GetRefusal(); ref != nil {
		return nil, http.StatusNotFound, strings.Join(ref.GetErrors(), " ")
	}
	rs := st.GetState()
	d := &runData{State: rs, CanAct: !rs.GetTerminalState(), Actions: rs.GetNextActions(), Warnings: rs.GetWarnings()}
	seen := map[string]bool{}
	add := func(state string, names []string) {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				d.Steps = append(d.Steps, stepRow{n, state})
			}
		}
	}
	// The gated step first: the engine also lists it in progress (or
	// completed, its output recorded before the question opened).
	if g := rs.GetPendingGate(); g != nil && !rs.GetTerminalState() {
		add("waiting at its gate", []string{g.GetStepName()})
		d.Gate = newGateView(id, g, p, s.o.Identity.EnforcesOwner())
		d.Gate.Return = "/runs/" + id
	}
	add("completed", rs.GetCompletedSteps())
	add("failed", rs.GetFailedSteps())
	add("in progress", rs.GetInProgressSteps())
	add("skipped", rs.GetSkippedSteps())
	add("defaulted", rs.GetDefaultedSteps())
	if x := rs.GetExtra(); x != nil {
		if h, ok := x.GetFields()["run_health"]; ok {
			for _, v := range h.GetListValue().GetValues() {
				f := v.GetStructValue().GetFields()
				d.Findings = append(d.Findings, finding{
					Kind: f["kind"].GetStringValue(), Step: f["step"].GetStringValue(),
					Reason: f["reason"].GetStringValue(), Since: f["since"].GetStringValue(),
					Evidence: structpb.NewStructValue(f["evidence"].GetStructValue()).AsInterface(),
				})
			}
		}
	}
	if !rs.GetTerminalState() {
		// The front-door certificate may not call ResumeRun (an operator's
		// verb, docs/security.md): the page gives the command instead.
		d.Resume = "realm run resume " + id
	}
	ins, err := s.o.Engine.InspectRun(ctx, &realmv1.InspectRunRequest{RunId: id, Verbose: true})
	if err != nil {
		d.Timeline = "The engine did not give the evidence: " + grpcMessage(err)
	} else {
		d.Timeline = ins.GetText()
	}
	return d, http.StatusOK, ""
}

// gateView is one open gate as a page shows it.
type gateView struct {
	RunID, WorkflowID, GateID, Step, Message, Owner string
	Preview                                         any
	Choices                                         []string
	OpenedAt, ExpiresAt                             *timestamppb.Timestamp
	OnExpiry, DefaultChoice                         string
	// Return is the page an answer comes back to.
	Return string
	// MayAnswer is false when the gate has an owner who is not the person.
	MayAnswer bool
	OwnerNote string
}

func newGateView(runID string, g *realmv1.PendingGate, p identity.Person, enforce bool) *gateView {
	v := &gateView{
		RunID: runID, GateID: g.GetGateId(), Step: g.GetStepName(), Message: g.GetResolvedMessage(), Owner: g.GetOwner(),
		Preview: g.GetPreview().AsInterface(), Choices: g.GetChoices(), OpenedAt: g.GetOpenedAt(), ExpiresAt: g.GetExpiresAt(),
		OnExpiry: g.GetOnExpiry(), DefaultChoice: g.GetDefaultChoice(), MayAnswer: true,
	}
	if enforce && !identity.MayAnswer(p, v.Owner) {
		v.MayAnswer = false
		v.OwnerNote = ownerRefusal(p, v.Owner)
	}
	return v
}

func ownerRefusal(p identity.Person, owner string) string {
	return fmt.Sprintf("Only %s may answer this gate (its owner); you are signed in as %s, so the console will not record your answer.", owner, p.Name)
}

type gatesData struct {
	Gates []*gateView
	Next  string
}

// gates is the inbox: the runs at a gate, newest gate first, a page at a
// time from the engine's index of open gates (ListRuns open_gates), each
// with its open gate read from the run's state.
func (s *Server) gates(w http.ResponseWriter, r *http.Request, p identity.Person) {
	pg := page{Title: "Gates", Person: p, Events: "view=gates", Notice: r.URL.Query().Get("notice"), Error: r.URL.Query().Get("refused")}
	d, err := s.loadGates(r, p, r.URL.Query().Get("page"))
	if err != nil {
		pg.Error = err.Error()
		s.render(w, http.StatusBadGateway, "gates", pg)
		return
	}
	pg.Data = d
	s.render(w, http.StatusOK, "gates", pg)
}

func (s *Server) loadGates(r *http.Request, p identity.Person, token string) (*gatesData, error) {
	ctx, cancel := s.call(r)
	defer cancel()
	resp, err := s.o.Engine.ListRuns(ctx, &realmv1.ListRunsRequest{OpenGates: true, Limit: s.o.PageSize, PageToken: token})
	if err != nil {
		return nil, fmt.Errorf("The engine did not list the open gates: %s", grpcMessage(err))
	}
	d := &gatesData{}
	for _, run := range resp.GetRuns() {
		st, err := s.o.Engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: run.GetRunId()})
		if err != nil || st.GetRefusal() != nil {
			continue // purged or answered since the listing
		}
		if g := st.GetState().GetPendingGate(); g != nil && !st.GetState().GetTerminalState() {
			v := newGateView(run.GetRunId(), g, p, s.o.Identity.EnforcesOwner())
			v.WorkflowID, v.Return = run.GetWorkflowId(), "/gates"
			d.Gates = append(d.Gates, v)
		}
	}
	if t := resp.GetNextPageToken(); t != "" {
		d.Next = "/gates?" + url.Values{"page": {t}}.Encode()
	}
	return d, nil
}

// back sends the person to the page the form came from, with the outcome.
func back(w http.ResponseWriter, r *http.Request, fallback, key, msg string) {
	dest := fallback
	if ret := r.FormValue("return"); ret == "/gates" || strings.HasPrefix(ret, "/runs/") && !strings.ContainsAny(ret, "?#\\") && !strings.HasPrefix(ret, "//") {
		dest = ret
	}
	http.Redirect(w, r, dest+"?"+url.Values{key: {msg}}.Encode(), http.StatusSeeOther)
}

// replyOutcome is an act's reply as a sentence: the engine's own errors
// when it refused, else what happened.
func replyOutcome(rep *realmv1.Reply, ok string) (refused bool, msg string) {
	if rep.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR || len(rep.GetErrors()) > 0 {
		m := strings.Join(rep.GetErrors(), " ")
		if m == "" {
			m = rep.GetErrorCode()
		}
		return true, m
	}
	if ph := phaseName(rep.GetRunPhase()); ph != "" {
		ok += " The run is now " + ph + "."
	}
	return false, ok
}

// answer records a choice at a gate, as the signed-in person.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, p identity.Person) {
	runID, gateID, choice := r.PathValue("run"), r.PathValue("gate"), r.FormValue("choice")
	fallback := "/runs/" + url.PathEscape(runID)
	ctx, cancel := s.call(r)
	defer cancel()
	if s.o.Identity.EnforcesOwner() {
		// The owner is read from the gate as it is now, not from the
		// form: the page may be older than the gate.
		st, err := s.o.Engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: runID})
		if err != nil {
			back(w, r, fallback, "refused", "The engine did not read the run: "+grpcMessage(err))
			return
		}
		if g := st.GetState().GetPendingGate(); g != nil && g.GetGateId() == gateID && !identity.MayAnswer(p, g.GetOwner()) {
			back(w, r, fallback, "refused", ownerRefusal(p, g.GetOwner()))
			return
		}
	}
	by := p.Name
	resp, err := s.o.Engine.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{RunId: runID, GateId: gateID, Choice: choice, RespondedBy: &by, Caller: caller(),
		RespondedByVerified: s.o.Vouch && p.Verified})
	if err != nil {
		back(w, r, fallback, "refused", "The engine did not take the answer: "+grpcMessage(err))
		return
	}
	if refused, msg := replyOutcome(resp.GetReply(), fmt.Sprintf("Answered %q as %s.", choice, p.Name)); refused {
		back(w, r, fallback, "refused", msg)
	} else {
		back(w, r, fallback, "notice", msg)
	}
}

// advance carries the run on (advance_run), as the CLI's `realm run advance`.
func (s *Server) advance(w http.ResponseWriter, r *http.Request, _ identity.Person) {
	runID := r.PathValue("run")
	fallback := "/runs/" + url.PathEscape(runID)
	ctx, cancel := s.call(r)
	defer cancel()
	resp, err := s.o.Engine.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{RunId: runID, Caller: caller()})
	if err != nil {
		back(w, r, fallback, "refused", "The engine did not advance the run: "+grpcMessage(err))
		return
	}
	if refused, msg := replyOutcome(resp.GetReply(), "Advanced."); refused {
		back(w, r, fallback, "refused", msg)
	} else {
		back(w, r, fallback, "notice", msg)
	}
}

// abandon ends the run abandoned, with the person's reason.
func (s *Server) abandon(w http.ResponseWriter, r *http.Request, p identity.Person) {
	runID := r.PathValue("run")
	fallback := "/runs/" + url.PathEscape(runID)
	reason := strings.TrimSpace(r.FormValue("reason"))
	if reason == "" {
		reason = "Abandoned from the console by " + p.Name
	}
	ctx, cancel := s.call(r)
	defer cancel()
	resp, err := s.o.Engine.AbandonRun(ctx, &realmv1.AbandonRunRequest{RunId: runID, Reason: reason, Caller: caller()})
	if err != nil {
		back(w, r, fallback, "refused", "The engine did not abandon the run: "+grpcMessage(err))
		return
	}
	if ref := resp.GetRefusal(); ref != nil {
		msg := strings.Join(ref.GetErrors(), " ")
		if msg == "" {
			msg = "The engine refused: " + ref.GetErrorCode()
		}
		back(w, r, fallback, "refused", msg)
		return
	}
	msg := "Abandoned. The run is now " + phaseName(resp.GetRunPhase()) + "."
	if n := resp.GetNote(); n != "" {
		msg += " " + n
	}
	back(w, r, fallback, "notice", msg)
}
