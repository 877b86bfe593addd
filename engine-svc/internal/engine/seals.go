package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// StampSeals writes the seal arm on ended runs recorded before seals
// existed (cli spec §4.11, run-record spec §5.2): the arm is worked out
// from the record (classified: true), never guessed; version rises so a
// stale writer loses its compare-and-set, and updated_at is kept (a
// stamp is not activity: retention clocks must not move). Runs already
// sealed are only checked.
func (e *Engine) StampSeals(ctx context.Context, req *realmv1.StampSealsRequest) (*realmv1.StampSealsResponse, error) {
	_, runs, err := e.maintainedRuns(ctx)
	if err != nil {
		return nil, err
	}
	resp := &realmv1.StampSealsResponse{}
	for _, s := range runs {
		r := s.run
		if !r.Terminal() {
			continue
		}
		if r.SealedBy != nil {
			switch bucket, note := checkSeal(r); bucket {
			case sealRuled:
				resp.Ruled++
			case sealUnverifiable:
				resp.Unverifiable++
			case sealIncoherent:
				resp.Incoherent = append(resp.Incoherent, &realmv1.SealFinding{RunId: r.ID, Arm: string(r.SealedBy.Arm), Phase: r.Phase(), Note: note})
			default:
				resp.Agreeing++
			}
			continue
		}
		seal, why := classifySeal(r)
		if seal == nil {
			resp.Unclassifiable = append(resp.Unclassifiable, &realmv1.SealFinding{RunId: r.ID, Phase: r.Phase(), Note: why})
			continue
		}
		found := &realmv1.SealFinding{RunId: r.ID, Arm: string(seal.Arm), Phase: r.Phase()}
		if !req.GetForce() {
			resp.Stamped = append(resp.Stamped, found)
			continue
		}
		stamped := false
		_, err := e.update(ctx, r.ID, func(t *txn) error {
			// Only the version the classifier read: a run written since is
			// someone else's to decide (skipped, not counted as residue).
			stamped = false
			if t.run.Version != r.Version || t.run.SealedBy != nil {
				return nil
			}
			t.maint, t.keepUpdatedAt = true, true
			t.run.SealedBy = &record.Seal{Arm: seal.Arm, Step: seal.Step, Classified: true}
			t.touch()
			stamped = true
			return nil
		})
		switch {
		case errors.Is(err, errRunNotFound):
			found.Note = "gone"
			resp.Skipped = append(resp.Skipped, found)
		case err != nil:
			found.Note = err.Error()
			resp.Failed = append(resp.Failed, found)
		case !stamped:
			found.Note = "written by another process meanwhile"
			resp.Skipped = append(resp.Skipped, found)
		default:
			resp.Stamped = append(resp.Stamped, found)
		}
	}
	return resp, nil
}

// sealBucket is what checkSeal makes of a run that already carries a seal.
type sealBucket string

// Buckets of a run that already carries a seal.
const (
	sealAgreeing     sealBucket = "agreeing"
	sealRuled        sealBucket = "ruled"
	sealUnverifiable sealBucket = "unverifiable"
	sealIncoherent   sealBucket = "incoherent"
)

// checkSeal says whether a sealed run's arm agrees with the rest of its
// record. Arms that leave no trace of their own (a guard resolution error,
// a spawn or extensions failure) cannot be confirmed: unverifiable.
func checkSeal(r *record.Run) (sealBucket, string) {
	s := r.SealedBy
	if s.Adjudicated != nil {
		return sealRuled, "" // a ruling skips the coherence check for good
	}
	phase, ok := record.ArmPhase[s.Arm]
	if !ok {
		return sealIncoherent, "unknown arm"
	}
	switch phase {
	case record.PhaseAbandoned:
		if r.AbandonedAt == "" {
			return sealIncoherent, "abandoned arm without abandoned_at"
		}
	case record.PhaseAborted:
		if r.AbandonedAt != "" {
			return sealIncoherent, "aborted arm on an abandoned record"
		}
		if s.Arm != record.ArmGateExpiryAbort && r.AbortedAt == nil {
			return sealIncoherent, "aborted arm without aborted_at"
		}
	case record.PhaseFailed:
		if r.AbandonedAt != "" || r.AbortedAt != nil {
			return sealIncoherent, "failed arm on an abandoned or aborted record"
		}
		if s.Arm != record.ArmStepFailure {
			return sealUnverifiable, ""
		}
		if len(r.FailedSteps) == 0 {
			return sealIncoherent, "step_failure without a failed step"
		}
	case record.PhaseCompleted:
		if r.AbandonedAt != "" || r.AbortedAt != nil {
			return sealIncoherent, "completed arm on an abandoned or aborted record"
		}
	}
	return sealAgreeing, ""
}

// classifySeal works out the arm a legacy ended record was sealed by, from
// the markers and reason the engine wrote with each arm, or says why it
// cannot. It is the one place a sentence is read: such a record carries
// no arm, only the terminal_reason written with it. The arm must end in the phase the record already derives: a
// stamp never changes how a run ended.
func classifySeal(r *record.Run) (*record.Seal, string) {
	reason := r.TerminalReason
	var s *record.Seal
	switch {
	case r.AbandonedAt != "":
		s = &record.Seal{Arm: record.ArmAbandonRequested}
		if reason == "Marked abandoned by realm cleanup" {
			s.Arm = record.ArmCleanupSweep
		}
	case r.AbortedAt != nil:
		step := r.AbortedAt.StepID
		switch {
		case strings.HasPrefix(reason, "Gate '") && strings.Contains(reason, "expired and the run aborted"):
			s = &record.Seal{Arm: record.ArmGateExpiryAbort, Step: step}
		case len(r.AbortedAt.Conditions) > 0:
			s = &record.Seal{Arm: record.ArmGuardAbort, Step: step}
		case strings.HasPrefix(reason, "Handler '"):
			s = &record.Seal{Arm: record.ArmHandlerAbort, Step: step}
		default:
			return nil, "aborted, but the record names neither a guard, a handler nor a gate expiry"
		}
	case reason == "extensions_load_failed":
		s = &record.Seal{Arm: record.ArmExtensionsLoadFailure}
	case strings.HasPrefix(reason, "spawn_failure"):
		s = &record.Seal{Arm: record.ArmSpawnFailure}
	case strings.HasPrefix(reason, "Guard step '") && strings.Contains(reason, "resolution error"):
		s = &record.Seal{Arm: record.ArmGuardResolutionError}
	case len(r.FailedSteps) > 0:
		s = &record.Seal{Arm: record.ArmStepFailure}
	case reason == "" || reason == "Workflow completed.":
		s = &record.Seal{Arm: record.ArmComplete}
	default:
		return nil, "ended with reason '" + reason + "', which names no arm"
	}
	if p := r.Phase(); record.ArmPhase[s.Arm] != p {
		return nil, "the record suggests '" + string(s.Arm) + "', which would change its phase '" + p + "'"
	}
	return s, ""
}
