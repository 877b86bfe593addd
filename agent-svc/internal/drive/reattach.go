package drive

import (
	"strconv"
	"strings"
)

// Flags are the drive flags a re-attach command repeats (§17), in order.
type Flags struct {
	Provider      string
	Model         string
	BaseURL       string
	StrictBaseURL bool
	// SchemaRetries is repeated only when it is not 2; negative is unset.
	SchemaRetries int
	// LLMTimeoutSeconds is repeated when set (> 0).
	LLMTimeoutSeconds int
	PromptCache       bool
	MintWriterNonce   bool
}

// reattach is the command that continues this run with the same flags.
func (d *driver) reattach() string {
	if d.runID == "" {
		return ""
	}
	f := d.o.Flags
	parts := []string{"realm", "agent", "--run-id", d.runID}
	if f.Provider != "" {
		parts = append(parts, "--provider", shellQuote(f.Provider))
	}
	if f.Model != "" {
		parts = append(parts, "--model", shellQuote(f.Model))
	}
	if f.BaseURL != "" {
		parts = append(parts, "--base-url", shellQuote(f.BaseURL))
	}
	if f.StrictBaseURL {
		parts = append(parts, "--strict-base-url")
	}
	if f.SchemaRetries >= 0 && f.SchemaRetries != DefaultSchemaRetries {
		parts = append(parts, "--schema-retries", strconv.Itoa(f.SchemaRetries))
	}
	if f.LLMTimeoutSeconds > 0 {
		parts = append(parts, "--llm-timeout", strconv.Itoa(f.LLMTimeoutSeconds))
	}
	if f.PromptCache {
		parts = append(parts, "--prompt-cache")
	}
	if f.MintWriterNonce {
		parts = append(parts, "--mint-writer-nonce")
	}
	return strings.Join(parts, " ")
}

func (d *driver) reattachLine() string {
	if d.runID == "" {
		return ""
	}
	return "Re-attach to continue: " + d.reattach()
}

// shellQuote single-quotes s when it holds anything a shell would read.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
