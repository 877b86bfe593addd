package reply

// ProofWords puts a gate answer's recorded claim proof in words, as
// `realm run inspect` and the dev mode print it (cli.md §3.2).
func ProofWords(p map[string]any) string {
	if p == nil {
		return "none recorded"
	}
	proof, _ := p["proof"].(string)
	cause, _ := p["cause"].(string)
	switch proof {
	case "matched":
		return "matched the claim_token of the reply that opened this question"
	case "absent":
		return "no claim_token passed (the CLI never passes one; over MCP, only the conversation that opened the question has one to pass)"
	case "mismatch":
		return "the claim_token passed is not this question's"
	case "unverifiable":
		switch cause {
		case "no_claim":
			return "could not be checked — no claim on this record"
		case "claim_has_no_token":
			return "could not be checked — the claim has no token"
		case "store_keeps_no_claims":
			return "could not be checked — this store keeps no claims"
		}
	case "spent":
		switch cause {
		case "answered":
			return "could not be checked — already settled by an earlier answer"
		case "expired":
			return "could not be checked — already settled by its expiry"
		}
	}
	return "the recorded proof cannot be read"
}
