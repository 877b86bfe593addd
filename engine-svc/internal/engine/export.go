package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// ExportRun writes the whole record as one bundle (run-record spec §9):
// the run with its evidence and outputs, and the refused answers
// (attempts.go). Claim and lease tokens are left out unless the request
// asks for them (with_secrets): a token settles its step, and a bundle is
// shared more widely than the engine's API.
func (e *Engine) ExportRun(ctx context.Context, req *realmv1.ExportRunRequest) (*realmv1.ExportRunResponse, error) {
	snap, err := e.st.LoadRun(ctx, req.GetRunId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errcode.New(errcode.StateRunNotFound, "Run not found: "+req.GetRunId())
	}
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	var run map[string]any
	if err := json.Unmarshal(snap.Doc, &run); err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	run["version"] = snap.Version
	if !req.GetWithSecrets() {
		withoutTokens(run)
	}
	var artifactErrors []any
	evidence := []any{}
	entries, err := e.st.Evidence(ctx, req.GetRunId(), 0, -1)
	if err != nil {
		artifactErrors = append(artifactErrors, map[string]any{"artifact": "evidence", "code": string(errcode.EngineStoreFailed), "message": err.Error()})
	}
	for _, raw := range entries {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			evidence = append(evidence, v)
		}
	}
	run["evidence"] = evidence
	outputs := map[string]any{}
	wal := map[string]any{}
	attempts, attemptsErr := decodeAttempts(snap.Outputs[attemptsField])
	if attemptsErr != nil {
		// Run-record spec §9: an unreadable part makes the bundle
		// incomplete; it never stops the export.
		artifactErrors = append(artifactErrors, map[string]any{"artifact": "failed-attempt sidecar", "code": string(errcode.EngineStoreFailed), "message": attemptsErr.Error()})
	}
	if raw, ok := snap.Outputs[definitionField]; ok {
		// The definition the run carries is part of its record: a bundle
		// read elsewhere names the steps' rules without the registry.
		var def any
		if json.Unmarshal(raw, &def) == nil {
			run["definition"] = def
		}
	}
	for k, raw := range snap.Outputs {
		if k == attemptsField || k == definitionField {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		if step, ok := strings.CutPrefix(k, traceField); ok {
			wal[step] = []any{map[string]any{"entries": v}}
			continue
		}
		outputs[k] = v
	}
	run["outputs"] = outputs
	bundle := map[string]any{
		"realm_export_version": 4,
		"exported_at":          record.FormatTime(e.now()),
		"run":                  run,
		"attempts":             append([]json.RawMessage{}, attempts.Records...),
		"attempts_capped":      attempts.Capped,
		"wal":                  wal,
		"sealed":               nil,
		"complete":             len(artifactErrors) == 0,
		"artifact_errors":      append([]any{}, artifactErrors...),
	}
	b, err := json.MarshalIndent(bundle, "", "  ")
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineInternal, err, "encode export: "+err.Error())
	}
	return &realmv1.ExportRunResponse{Bundle: b}, nil
}

// withoutTokens removes from a run document every claim or lease token:
// of claims in progress, of settled steps, of answered gates and of
// finalizer leases.
func withoutTokens(run map[string]any) {
	for _, field := range []string{"claims", "settled", "resolved_gates"} {
		m, _ := run[field].(map[string]any)
		for _, v := range m {
			if entry, ok := v.(map[string]any); ok {
				delete(entry, "token")
			}
		}
	}
	ledger, _ := run["finalizer_ledger"].(map[string]any)
	for _, v := range ledger {
		if entry, ok := v.(map[string]any); ok {
			delete(entry, "lease_token")
		}
	}
}
