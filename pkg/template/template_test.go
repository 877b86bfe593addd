package template

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// setup returns a scope resembling a run in progress, with a fixed clock.
func setup(t *testing.T) Scope {
	t.Helper()
	var resources map[string]any
	raw := `{
	  "lookup": {"name": "ada lovelace", "orders": [{"id": "A1"}, {"id": "B2"}], "tier": "gold",
	             "last_contact": "2026-01-28T14:05:00Z", "total": 1234.5, "count": 3, "vip": true,
	             "note": null, "tags": ["x", "y"], "meta": {"k": 1}},
	  "$settlement": {"lookup": {"failed": false, "settled_by_default": false, "validation_rejections": 1}}
	}`
	if err := json.Unmarshal([]byte(raw), &resources); err != nil {
		t.Fatal(err)
	}
	return Scope{
		Params:          map[string]any{"mailbox": "inbox@example.com", "limit": 5, "ids": []any{1, 2}},
		Resources:       resources,
		WorkflowContext: map[string]string{"house_style": "Be brief.", "api.v2": "Use v2.\n"},
		Output:          map[string]any{"word_count": 120, "title": "Draft", "parts": map[string]any{"a": "b"}},
		Now:             func() time.Time { return time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC) },
	}
}

func TestRenderPrompt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		text       string
		want       string
		unresolved []string
	}{
		{"plain text untouched", "no expressions here", "no expressions here", nil},
		{"run params root", "Box: {{ run.params.mailbox }}", "Box: inbox@example.com", nil},
		{"step output root", "{{ context.resources.lookup.tier }}", "gold", nil},
		{"settlement root", "{{ context.resources.$settlement.lookup.validation_rejections }}", "1", nil},
		{"list index segment", "{{ context.resources.lookup.orders.1.id }}", "B2", nil},
		{"no spaces inside braces", "{{run.params.mailbox}}", "inbox@example.com", nil},
		{"integer without .0", "{{ run.params.limit }}", "5", nil},
		{"decimal number", "{{ context.resources.lookup.total }}", "1234.5", nil},
		{"boolean as JSON", "{{ context.resources.lookup.vip }}", "true", nil},
		{"present null as JSON", "{{ context.resources.lookup.note }}", "null", nil},
		{"list as indented JSON", "{{ context.resources.lookup.tags }}", "[\n  \"x\",\n  \"y\"\n]", nil},
		{"map as indented JSON", "{{ context.resources.lookup.meta }}", "{\n  \"k\": 1\n}", nil},
		{"missing path left as written", "Hi {{ context.resources.lookup.nope }}!", "Hi {{ context.resources.lookup.nope }}!", []string{"context.resources.lookup.nope"}},
		{"path without root finds nothing", "{{ lookup.tier }}", "{{ lookup.tier }}", []string{"lookup.tier"}},
		{"missing reported once", "{{ a.b }} {{ a.b }}", "{{ a.b }} {{ a.b }}", []string{"a.b"}},
		{"unknown filter left as written", "{{ context.resources.lookup.tier | shout }}", "{{ context.resources.lookup.tier | shout }}", nil},
		{"wrong kind left as written", "{{ context.resources.lookup.count | upper }}", "{{ context.resources.lookup.count | upper }}", nil},
		{"default replaces missing", "{{ context.resources.lookup.plan | default: \"standard\" }}", "standard", nil},
		{"default keeps present value", "{{ context.resources.lookup.tier | default: \"standard\" }}", "gold", nil},
		{"default keeps present null", "{{ context.resources.lookup.note | default: \"n/a\" }}", "null", nil},
		{"default does not rescue failed filter", "{{ context.resources.lookup.count | upper | default: \"x\" }}", "{{ context.resources.lookup.count | upper | default: \"x\" }}", nil},
		{"filter after default", "{{ run.params.nope | default: \"abc\" | upper }}", "ABC", nil},
		{"filter on missing is unresolved", "{{ run.params.nope | upper }}", "{{ run.params.nope | upper }}", []string{"run.params.nope"}},
		{"filters apply left to right", "{{ context.resources.lookup.orders | pluck: \"id\" | join: \" + \" }}", "A1 + B2", nil},
		{"unclosed braces are text", "a {{ run.params.mailbox", "a {{ run.params.mailbox", nil},
		{"workflow context xml default", "{{ workflow.context.house_style }}", "<house_style>\nBe brief.\n</house_style>", nil},
		{"workflow context raw", "{{ workflow.context.house_style.raw }}", "Be brief.", nil},
		{"context name with dot and trailing newline", "{{ workflow.context.api.v2 }}", "<api.v2>\nUse v2.\n\n</api.v2>", nil},
		{"context name with dot raw", "{{ workflow.context.api.v2.raw }}", "Use v2.\n", nil},
		{"missing context entry left as written", "{{ workflow.context.absent }}", "{{ workflow.context.absent }}", []string{"workflow.context.absent"}},
		{"context. prefix alone finds nothing", "{{ context.resources }}", "{{ context.resources }}", []string{"context.resources"}},
	}
	s := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, unresolved, err := Render(tt.text, s, ModePrompt)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %q want %q", got, tt.want)
			}
			if !reflect.DeepEqual(unresolved, tt.unresolved) {
				t.Errorf("unresolved %q want %q", unresolved, tt.unresolved)
			}
		})
	}
}

func TestRenderContextWrapper(t *testing.T) {
	t.Parallel()
	tests := []struct{ wrapper, want string }{
		{"", "<style>\nBe brief.\n</style>"},
		{"xml", "<style>\nBe brief.\n</style>"},
		{"brackets", "[style]\nBe brief.\n[/style]"},
		{"none", "Be brief."},
	}
	for _, tt := range tests {
		t.Run("wrapper "+tt.wrapper, func(t *testing.T) {
			t.Parallel()
			s := Scope{WorkflowContext: map[string]string{"style": "Be brief."}, ContextWrapper: tt.wrapper}
			got, _, err := Render("{{ workflow.context.style }}", s, ModePrompt)
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v want %q", got, err, tt.want)
			}
		})
	}
}

// TestRenderSpecExample renders the prompt of the §8.2 example.
func TestRenderSpecExample(t *testing.T) {
	t.Parallel()
	prompt := `{{ workflow.context.house_style }}
Customer: {{ context.resources.lookup.name | title }}
Open orders: {{ context.resources.lookup.orders | pluck: "id" | join: ", " }}
Tier: {{ context.resources.lookup.plan | default: "standard" }}
Last contact: {{ context.resources.lookup.last_contact | date: "long" }}
`
	want := `<house_style>
Be brief.
</house_style>
Customer: Ada Lovelace
Open orders: A1, B2
Tier: standard
Last contact: January 28, 2026
`
	got, unresolved, err := Render(prompt, setup(t), ModePrompt)
	if err != nil || len(unresolved) != 0 {
		t.Fatalf("err %v unresolved %v", err, unresolved)
	}
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestRenderGateMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		text     string
		want     string
		wantErr  string
		wantCode string
	}{
		{"resolves like a prompt", "Approve {{ context.resources.lookup.total | number_format: 2 }}?", "Approve 1,234.50?", "", ""},
		{"one unresolvable path", "Send to {{ run.params.nope }}?", "",
			"GATE_MESSAGE_UNRESOLVABLE: gate.message has unresolvable references: run.params.nope", CodeGateMessageUnresolvable},
		{"several unresolvable paths", "{{ a.b }} {{ run.params.x }} {{ a.b }} {{ run.params.mailbox }}", "",
			"GATE_MESSAGE_UNRESOLVABLE: gate.message has unresolvable references: a.b, run.params.x", CodeGateMessageUnresolvable},
		{"unknown filter", "{{ run.params.mailbox | shout }}", "",
			"FILTER_UNKNOWN: gate.message uses unknown filter 'shout'", CodeFilterUnknown},
		{"unknown filter wins over unresolvable path", "{{ a.b }} {{ run.params.mailbox | upper | shout: 1 }}", "",
			"FILTER_UNKNOWN: gate.message uses unknown filter 'shout'", CodeFilterUnknown},
		{"default rescues missing path", "{{ run.params.nope | default: \"none\" }}", "none", "", ""},
		{"wrong kind left as written", "{{ run.params.limit | upper }}", "{{ run.params.limit | upper }}", "", ""},
	}
	s := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := Render(tt.text, s, ModeGateMessage)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("got %q, %v want %q", got, err, tt.want)
				}
				return
			}
			var te *Error
			if !errors.As(err, &te) || err.Error() != tt.wantErr || te.Code != tt.wantCode {
				t.Errorf("err %v want %q", err, tt.wantErr)
			}
		})
	}
}

func TestRenderDisplay(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, text, want string }{
		{"own output field (spec example)", "Reply drafted ({{ word_count }} words)", "Reply drafted (120 words)"},
		{"text field", "{{ title }}", "Draft"},
		{"nested field", "{{ parts.a }}", "b"},
		{"filter prints nothing", "[{{ title | upper }}]", "[]"},
		{"run params root prints nothing", "[{{ run.params.mailbox }}]", "[]"},
		{"context root prints nothing", "[{{ context.resources.lookup.tier }}]", "[]"},
		{"workflow root prints nothing", "[{{ workflow.context.house_style }}]", "[]"},
		{"missing prints nothing", "[{{ nope }}]", "[]"},
	}
	s := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := Render(tt.text, s, ModeDisplay)
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v want %q", got, err, tt.want)
			}
		})
	}
}

func TestToText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"string as-is", "a <b> & c", "a <b> & c"},
		{"int", 42, "42"},
		{"integral float", 5.0, "5"},
		{"float", 9.99, "9.99"},
		{"negative", -1.5, "-1.5"},
		{"bool", false, "false"},
		{"nil", nil, "null"},
		{"empty list", []any{}, "[]"},
		{"nested", map[string]any{"a": []any{1.0, "<x>"}}, "{\n  \"a\": [\n    1,\n    \"<x>\"\n  ]\n}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ToText(tt.v); got != tt.want {
				t.Errorf("got %q want %q", got, tt.want)
			}
		})
	}
}

func TestRenderNoPanicOnOddInput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, text := range []string{"{{}}", "{{ | }}", "{{ a | : }}", "{{ '}} }}", "}}{{", "{{ run.params.mailbox | join: \" }}", "{{ ..a.. }}"} {
		for _, m := range []Mode{ModePrompt, ModeGateMessage, ModeDisplay} {
			_, _, _ = Render(text, s, m)
		}
	}
	if !strings.Contains(FilterNames()[0], "abs") || len(FilterNames()) != 34 {
		t.Errorf("want 34 filters starting with abs, got %v", FilterNames())
	}
}

func FuzzRender(f *testing.F) {
	for _, seed := range []string{
		"{{ run.params.mailbox | upper }}", "{{ a | join: \", \" | truncate: 3 }}", "{{ workflow.context.api.v2.raw }}",
		"{{ context.resources.lookup.orders | pluck: 'id' | and_join }}", "{{ x | default: }}", "{{ | | }}", "{{'",
		"{{ context.resources.lookup.total | round: 99 | number_format: -1 }}", "{{ run.params.ids | sum | duration }}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s := Scope{
			Params:          map[string]any{"mailbox": "a@b", "ids": []any{1.0, 2.0}},
			Resources:       map[string]any{"lookup": map[string]any{"orders": []any{map[string]any{"id": "A"}}, "total": 1.5}},
			WorkflowContext: map[string]string{"api.v2": "x"},
			Output:          map[string]any{"a": 1},
		}
		for _, m := range []Mode{ModePrompt, ModeGateMessage, ModeDisplay} {
			out, _, err := Render(text, s, m)
			if m == ModePrompt && err != nil {
				t.Fatalf("prompt mode never fails: %v", err)
			}
			if m == ModePrompt && !strings.Contains(text, "{{") && out != text {
				t.Fatalf("text without expressions changed: %q -> %q", text, out)
			}
		}
	})
}
