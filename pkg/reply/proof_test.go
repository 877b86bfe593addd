package reply

import "testing"

// proofOf builds a recorded proof from key, value pairs.
func proofOf(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestProofWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		proof map[string]any
		want  string
	}{
		{proofOf("proof", "mismatch"), "the claim_token passed is not this question's"},
		{proofOf("proof", "unverifiable", "cause", "no_claim"), "could not be checked — no claim on this record"},
		{proofOf("proof", "unverifiable", "cause", "claim_has_no_token"), "could not be checked — the claim has no token"},
		{proofOf("proof", "unverifiable", "cause", "store_keeps_no_claims"), "could not be checked — this store keeps no claims"},
		{proofOf("proof", "spent", "cause", "answered"), "could not be checked — already settled by an earlier answer"},
		{proofOf("proof", "spent", "cause", "expired"), "could not be checked — already settled by its expiry"},
		{nil, "none recorded"},
		{proofOf("proof", 7.0), "the recorded proof cannot be read"},
		{proofOf("proof", "unverifiable", "cause", "??"), "the recorded proof cannot be read"},
	}
	for _, tt := range tests {
		if got := ProofWords(tt.proof); got != tt.want {
			t.Errorf("ProofWords(%v) = %q, want %q", tt.proof, got, tt.want)
		}
	}
}
