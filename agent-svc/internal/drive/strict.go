package drive

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/pkg/workflow"
)

// Downgrade reasons decided before any request (agent-driver §8.3); the
// live ones are the provider's.
const (
	reasonGateIneligible      = "gate_ineligible"
	reasonCompatEndpoint      = "compat_endpoint"
	reasonProviderUnsupported = "provider_unsupported"
	reasonContextTools        = "unsupported_context_tools"
)

// readStrict marks the agent steps that declare `structured_output:
// strict` (workflow-file §11.2) from the registered definition and plans
// how each is sent under the active provider (strictPlan).
func (d *driver) readStrict(definition []byte) {
	var def workflow.Definition
	if len(definition) == 0 || json.Unmarshal(definition, &def) != nil {
		return
	}
	for id, st := range def.Steps {
		info, ok := d.steps[id]
		if !ok || st == nil || st.StructuredOutput != "strict" {
			continue
		}
		info.strictRequested = true
		d.strictPlan(id, &info, st.StrictSchema(), len(st.Tools) > 0)
		d.steps[id] = info
	}
}

// strictPlan decides whether a strict step is sent strict. The loader
// judged the schema with Anthropic's rules; the drive judges it again with
// the active provider's, because a registered workflow may meet a
// provider with other rules (OpenAI wants every property required). An
// ineligible schema degrades loudly rather than refusing the drive: it is
// not sent strict (gate_ineligible) and the step's first call says why.
func (d *driver) strictPlan(id string, info *stepInfo, schema any, hasTools bool) {
	switch {
	case hasTools:
		// The output of a tools step is never constrained; its tool
		// arguments are (tools.go).
		info.strictReason = reasonContextTools
		return
	case d.providerName() == provider.OpenAIReasoning:
		info.strictReason = reasonProviderUnsupported
		return
	case d.compatEndpoint():
		// Strict is never sent there, so the schema is not assessed.
		info.strictReason = reasonCompatEndpoint
		return
	}
	v := d.verdict(schema)
	info.strict, info.strictCaveats = v.Eligible(), v.Caveats
	switch {
	case !v.Eligible():
		info.strictReason = reasonGateIneligible
		info.strictNote = fmt.Sprintf("  ⚠ Step '%s': structured_output: strict — not sent (gate_ineligible): %s; the answer is validated after it arrives.", id, strings.Join(v.Refusals, "; "))
	case len(v.Caveats) > 0:
		info.strictNote = fmt.Sprintf("  ⚠ Step '%s': structured_output: strict — sent, with caveats: %s.", id, strings.Join(v.Caveats, "; "))
	}
}

// verdict judges schema with the active provider's rules.
func (d *driver) verdict(schema any) workflow.StrictVerdict {
	if d.providerName() == provider.OpenAI {
		return workflow.CheckStrictOpenAI(schema)
	}
	return workflow.CheckStrict(schema)
}

func (d *driver) providerName() string {
	if d.o.Provider == nil {
		return ""
	}
	return d.o.Provider.Name()
}

// compatEndpoint says requests go to an OpenAI-compatible service that was
// not attested to enforce strict (--base-url without --strict-base-url).
func (d *driver) compatEndpoint() bool {
	return d.o.Flags.BaseURL != "" && !d.o.Flags.StrictBaseURL
}

// strictNoteOnce is the step's structured-output ⚠ line the first time
// the step is driven in this process, nil after.
func (d *driver) strictNoteOnce(step string, info stepInfo) []string {
	if info.strictNote == "" || d.strictWarned[step] {
		return nil
	}
	d.strictWarned[step] = true
	return []string{info.strictNote}
}

// strictFor says whether this attempt of step goes out strict: never
// after the step's strict request was downgraded live earlier in this
// drive (§8.5).
func (d *driver) strictFor(step string, info stepInfo) bool {
	return info.strict && d.downgraded[step] == nil
}

// noteDowngrade arms stickiness for step after a live downgrade (from an
// answer or a failure). gate_ineligible and compat_endpoint are decided
// before any request and never come here.
func (d *driver) noteDowngrade(step string, dg *provider.Downgrade) {
	if dg != nil && d.downgraded[step] == nil {
		d.downgraded[step] = dg
	}
}

// strictRecord is the structured_output record of an answer (agent-driver
// §8.3) for a step that asked for it: whether strict was sent and, if not,
// why. sent means only that Realm put strict on the request. nil for a
// step that did not ask.
func (d *driver) strictRecord(step string, info stepInfo, res *provider.Result, box *toolbox) *structpb.Struct {
	if !info.strictRequested {
		return nil
	}
	rec := d.strictFields(step, info, res.StrictSent, res.Channel)
	if box != nil && box.toolArgs != nil {
		rec["tool_args"] = toolArgsRecord(box, res)
	}
	return toStruct(rec)
}

// strictFields are the record's fields: {requested, sent, provider} when
// sent, else also downgrade_reason and what explains it (the service's
// message, param and code of a live refusal; the schema's caveats; the
// channel the answer came by).
func (d *driver) strictFields(step string, info stepInfo, sent bool, channel string) map[string]any {
	rec := map[string]any{"requested": true, "sent": sent, "provider": d.providerName()}
	if sent {
		return rec
	}
	reason := info.strictReason
	dg := d.downgraded[step]
	switch {
	case reason != "":
	case dg != nil:
		reason = dg.Reason
		rec["api_message"] = dg.APIMessage
		if dg.HasParamCode {
			rec["api_param"], rec["api_code"] = dg.APIParam, dg.APICode
		}
	default:
		// Eligible, not downgraded, yet not sent: the provider has no
		// strict mode to put it in.
		reason = reasonProviderUnsupported
	}
	rec["downgrade_reason"] = reason
	if len(info.strictCaveats) > 0 {
		rec["caveats"] = toAny(info.strictCaveats)
	}
	if channel != "" {
		rec["submission_channel"] = channel
	}
	return rec
}

func toStruct(m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}
