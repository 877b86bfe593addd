package engine

import (
	"context"
	"errors"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// keptDriveFailures is how many drive failures a run keeps (the last ones).
const keptDriveFailures = 5

// RecordDriveFailure records a failed drive on the run (run-record spec
// §4.7): total and first_failed_at are never reset, the last five entries
// are kept, and the write advances updated_at like any other.
func (e *Engine) RecordDriveFailure(ctx context.Context, req *realmv1.RecordDriveFailureRequest) (*realmv1.RecordDriveFailureResponse, error) {
	f := req.GetFailure()
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		r := t.run
		df := &record.DriveFailures{}
		if r.DriveFailures != nil {
			*df = *r.DriveFailures // the cached run is never changed in place
		}
		entry := record.DriveFailure{At: f.GetAt(), Step: f.GetStep(), Provider: f.GetProvider(), ErrorClass: f.GetErrorClass(),
			Message: f.GetMessage(), ElapsedMS: f.GetElapsedMs(),
			DeclaredPerAttemptMS: f.DeclaredPerAttemptMs, DerivedCeilingMS: f.DerivedCeilingMs, RetryAfterObservedMS: f.RetryAfterObservedMs, Code: f.GetCode()}
		if so := f.GetStructuredOutput(); len(so.GetFields()) > 0 {
			entry.StructuredOutput = so.AsMap()
		}
		if entry.At == "" {
			entry.At = t.stamp()
		}
		if n := int64(f.GetAttemptsSdk()); n > 0 {
			entry.AttemptsSDK = &n
		}
		if f.LastObservedStatus != nil {
			s := int64(f.GetLastObservedStatus())
			entry.LastObservedStatus = &s
		}
		for _, u := range f.GetUsage() {
			entry.Usage = append(entry.Usage, map[string]any{"request_index": u.GetRequestIndex(), "prompt_tokens": u.PromptTokens, "output_tokens": u.OutputTokens})
		}
		if df.FirstFailedAt == "" {
			df.FirstFailedAt = entry.At
		}
		df.Total++
		df.Entries = append(append([]record.DriveFailure{}, df.Entries...), entry)
		if len(df.Entries) > keptDriveFailures {
			df.Entries = df.Entries[len(df.Entries)-keptDriveFailures:]
		}
		r.DriveFailures = df
		t.touch()
		return nil
	})
	if errors.Is(err, errRunNotFound) {
		return nil, errcode.New(errcode.StateRunNotFound, "Run not found: "+req.GetRunId())
	}
	if err != nil {
		return nil, err
	}
	return &realmv1.RecordDriveFailureResponse{RunVersion: t.run.Version}, nil
}
