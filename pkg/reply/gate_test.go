package reply

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func TestGateQuestionShowsWhatAPersonIsAsked(t *testing.T) {
	t.Parallel()
	msg := "Send this reply?"
	value := func(v any) *structpb.Value {
		pv, err := structpb.NewValue(v)
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	for _, tt := range []struct {
		name string
		g    *realmv1.PendingGate
		want string
	}{
		{"the resolved message first", &realmv1.PendingGate{ResolvedMessage: &msg, Preview: value("ignored")}, msg},
		{"headline and message", &realmv1.PendingGate{Preview: value(map[string]any{"headline": "Refund 40 EUR", "message": "Order A-17", "x": 1.0})}, "Refund 40 EUR\n\nOrder A-17"},
		{"an empty output", &realmv1.PendingGate{Preview: value(map[string]any{})}, "(no output)"},
		{"a text as it is", &realmv1.PendingGate{Preview: value("Ship it?")}, "Ship it?"},
		{"anything else as JSON", &realmv1.PendingGate{Preview: value(map[string]any{"total": 40.0})}, "{\n  \"total\": 40\n}"},
	} {
		if got := GateQuestion(tt.g); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
