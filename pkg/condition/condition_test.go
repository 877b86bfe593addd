package condition

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseAcceptsGrammar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		text  string
		root  Root
		step  string
		field []string
		op    string
		value any
	}{
		{"step field compared to number", "invoice.total > 100", RootStep, "invoice", []string{"total"}, ">", 100.0},
		{"list index segment", "invoice.lines.2.sku == 'A-1'", RootStep, "invoice", []string{"lines", "2", "sku"}, "==", "A-1"},
		{"nested map path", "invoice.customer.country != 'NL'", RootStep, "invoice", []string{"customer", "country"}, "!=", "NL"},
		{"run params root", "run.params.region == 'emea'", RootParams, "", []string{"region"}, "==", "emea"},
		{"settlement root", "$settlement.charge.failed == true", RootSettlement, "charge", []string{"failed"}, "==", true},
		{"double quoted text", `review.choice == "approve"`, RootStep, "review", []string{"choice"}, "==", "approve"},
		{"operator inside quotes is text", "a.x == '>= 1 and 2'", RootStep, "a", []string{"x"}, "==", ">= 1 and 2"},
		{"other quote inside quotes", `a.x == "it's"`, RootStep, "a", []string{"x"}, "==", "it's"},
		{"bare word is text", "x.y == billing", RootStep, "x", []string{"y"}, "==", "billing"},
		{"negative number", "a.delta >= -1", RootStep, "a", []string{"delta"}, ">=", -1.0},
		{"decimal number", "a.price <= 9.99", RootStep, "a", []string{"price"}, "<=", 9.99},
		{"true literal", "a.ok == true", RootStep, "a", []string{"ok"}, "==", true},
		{"false literal", "a.ok != false", RootStep, "a", []string{"ok"}, "!=", false},
		{"null literal", "a.note == null", RootStep, "a", []string{"note"}, "==", nil},
		{"quoted number stays text", "a.x == '5'", RootStep, "a", []string{"x"}, "==", "5"},
		{"leading plus is a bare word", "a.x == +5", RootStep, "a", []string{"x"}, "==", "+5"},
		{"no whitespace around operator", "a.x>=1", RootStep, "a", []string{"x"}, ">=", 1.0},
		{"longest operator first", "a.x<=1", RootStep, "a", []string{"x"}, "<=", 1.0},
		{"less than", "a.x < 1", RootStep, "a", []string{"x"}, "<", 1.0},
		{"extra whitespace", "  a.x   ==   1  ", RootStep, "a", []string{"x"}, "==", 1.0},
		{"path alone", "review.approved", RootStep, "review", []string{"approved"}, "", nil},
		{"step alone", "review", RootStep, "review", []string{}, "", nil},
		{"context prefix parses as step context", "context.resources.a.x == 1", RootStep, "context", []string{"resources", "a", "x"}, "==", 1.0},
		{"word containing and is not a connective", "brand.android == candy", RootStep, "brand", []string{"android"}, "==", "candy"},
		{"segment named and is not a connective", "a.and == 1", RootStep, "a", []string{"and"}, "==", 1.0},
		{"empty quoted text", "a.x == ''", RootStep, "a", []string{"x"}, "==", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(tt.text)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.text, err)
			}
			if c.Text != tt.text || c.Root != tt.root || c.Step != tt.step || !reflect.DeepEqual(c.Field, tt.field) {
				t.Errorf("got text=%q root=%v step=%q field=%q", c.Text, c.Root, c.Step, c.Field)
			}
			if c.HasOp != (tt.op != "") || c.Op != tt.op || !reflect.DeepEqual(c.Value, tt.value) {
				t.Errorf("got hasOp=%v op=%q value=%#v, want op=%q value=%#v", c.HasOp, c.Op, c.Value, tt.op, tt.value)
			}
		})
	}
}

func TestParseRefusesConnectives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		field string
		text  string
		want  string
	}{
		{"and in when (spec example)", "when", "a.x == 1 and a.y == 2",
			"'when' uses unsupported 'and' — write it as a list:\n  when:\n    - \"a.x == 1\"\n    - \"a.y == 2\""},
		{"or in when", "when", "a.x == 1 or a.y == 2",
			"'when' uses unsupported 'or' — write it as a list:\n  when:\n    - \"a.x == 1\"\n    - \"a.y == 2\""},
		{"field name is a parameter", "preconditions", "s.n >= 1 and s.m < 3",
			"'preconditions' uses unsupported 'and' — write it as a list:\n  preconditions:\n    - \"s.n >= 1\"\n    - \"s.m < 3\""},
		{"three parts list all", "abort_unless", "a.x and a.y and a.z",
			"'abort_unless' uses unsupported 'and' — write it as a list:\n  abort_unless:\n    - \"a.x\"\n    - \"a.y\"\n    - \"a.z\""},
		{"upper case AND", "when", "a.x == 1 AND a.y == 2",
			"'when' uses unsupported 'and' — write it as a list:\n  when:\n    - \"a.x == 1\"\n    - \"a.y == 2\""},
		{"quoted parts kept verbatim", "when", "a.x == 'p q' and a.y == \"r\"",
			"'when' uses unsupported 'and' — write it as a list:\n  when:\n    - \"a.x == 'p q'\"\n    - \"a.y == \"r\"\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseFor(tt.field, tt.text)
			if err == nil {
				t.Fatalf("ParseFor(%q) succeeded, want error", tt.text)
			}
			if err.Error() != tt.want {
				t.Errorf("message:\n%s\nwant:\n%s", err.Error(), tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Connective == "" || pe.Field != tt.field {
				t.Errorf("want *ParseError with connective, got %#v", err)
			}
		})
	}
}

func TestParseDefaultsToWhen(t *testing.T) {
	t.Parallel()
	_, err := Parse("a.x == 1 and a.y == 2")
	want := "'when' uses unsupported 'and' — write it as a list:\n  when:\n    - \"a.x == 1\"\n    - \"a.y == 2\""
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, wantSub string
	}{
		{"empty", "", "'when' condition is empty"},
		{"blank", "   ", "'when' condition is empty"},
		{"empty segment", "a..b == 1", "empty path segment"},
		{"leading dot", ".a == 1", "empty path segment"},
		{"trailing dot", "a. == 1", "empty path segment"},
		{"no value", "a.x ==", "no value after '=='"},
		{"no path", "== 1", "no path before the operator"},
		{"unterminated quote", "a.x == 'abc", "unterminated quote"},
		{"text after quoted value", "a.x == 'a' 'b'", "text after the quoted value"},
		{"single equals", "a.x = 1", "use '==' to compare"},
		{"spaces in path", "a x == 1", "must be dotted names"},
		{"unquoted value with spaces", "a.x == big cat", "unquoted value with spaces"},
		{"settlement without step", "$settlement == 1", "must name a step"},
		{"double operator", "a.x == 1 == 2", "more than one operator"},
		{"operator glued to value", "a.x<>1", "more than one operator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(tt.text)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error", tt.text, c)
			}
			if !strings.HasPrefix(err.Error(), "'when' ") || !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("error %q, want prefix 'when' and %q", err.Error(), tt.wantSub)
			}
		})
	}
}

// setup returns a scope with the data the evaluation tables read.
func setup(t *testing.T) Scope {
	t.Helper()
	var outputs map[string]any
	raw := `{
	  "n":   {"five": 5, "five_f": 5.0, "p999": 9.99, "neg": -4.2, "zero": 0, "text5": "5",
	          "word": "discard", "Word": "Discard", "yes": true, "no": false, "empty": "",
	          "nul": null, "list": [], "map": {}, "items": ["a", "b"], "twelve": 12,
	          "byname": {"0": "zero-key"}, "obj": {"k": 1}},
	  "order": {"items": ["a", "b"], "lines": [{"sku": "X"}, {"sku": "Y"}, {"sku": "Z"}]}
	}`
	if err := json.Unmarshal([]byte(raw), &outputs); err != nil {
		t.Fatal(err)
	}
	return Scope{
		Outputs: outputs,
		Params:  map[string]any{"region": "emea", "limit": 10},
		Settlement: map[string]map[string]any{
			"charge": {"failed": true, "settled_by_default": false, "validation_rejections": 2},
		},
	}
}

func eval(t *testing.T, f Field, text string, s Scope) Result {
	t.Helper()
	c, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return c.Eval(f, s)
}

// TestEvalWhen covers every row of the §7.3 table plus its recommendations.
func TestEvalWhen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want bool
	}{
		// number vs number, any operator
		{"int equals int", "n.five == 5", true},
		{"int equals decimal literal", "n.five == 5.0", true},
		{"decimal output equals int literal", "n.five_f == 5", true},
		{"decimal >= equal decimal", "n.p999 >= 9.99", true},
		{"negative decimal < negative", "n.neg < -1", true},
		{"number > number false", "n.five > 5", false},
		{"number <= number", "n.five <= 5", true},
		{"number != other number", "n.five != 6", true},
		{"number != same number", "n.five != 5", false},
		// number vs text, ==
		{"number == quoted text false", "n.five == '5'", false},
		{"text == number false", "n.text5 == 5", false},
		// text vs text
		{"text equals", "n.word == 'discard'", true},
		{"text equality is case-sensitive", "n.Word == 'discard'", false},
		{"text not equal", "n.word != 'keep'", true},
		{"bare word equals quoted", "n.word == discard", true},
		// boolean
		{"bool == true", "n.yes == true", true},
		{"bool == false", "n.no == false", true},
		{"bool == other bool", "n.yes == false", false},
		{"bool vs text 'true' false", "n.yes == 'true'", false},
		// ordering only for two numbers
		{"text > number false", "n.text5 > 1", false},
		{"text < text false", "n.word < 'z'", false},
		{"bool >= number false", "n.yes >= 0", false},
		// value missing
		{"missing == null true", "n.absent == null", true},
		{"missing != text false", "n.absent != 'x'", false},
		{"missing > 1 false", "n.absent > 1", false},
		{"missing == text false", "n.absent == 'x'", false},
		{"missing != null false", "n.absent != null", false},
		{"missing step == null true", "ghost.x == null", true},
		// present null
		{"present null == null true", "n.nul == null", true},
		{"present null != null false", "n.nul != null", false},
		{"present null != text true (recommended)", "n.nul != 'x'", true},
		{"present null == text false", "n.nul == 'x'", false},
		// present not null
		{"present != null true", "n.word != null", true},
		{"present == null false", "n.word == null", false},
		{"present zero != null true", "n.zero != null", true},
		// different types (recommended: != is negation of ==)
		{"text != number true", "n.text5 != 5", true},
		{"bool != text true", "n.yes != 'true'", true},
		// lists and maps never equal
		{"list == text false", "n.items == 'a'", false},
		{"list != text true", "n.items != 'a'", true},
		{"map == null false", "n.map == null", false},
		// path alone truthiness
		{"truthy false", "n.no", false},
		{"truthy zero", "n.zero", false},
		{"truthy empty text", "n.empty", false},
		{"truthy null", "n.nul", false},
		{"truthy missing", "n.absent", false},
		{"truthy empty list", "n.list", true},
		{"truthy empty map", "n.map", true},
		{"truthy non-zero number", "n.neg", true},
		{"truthy non-empty text", "n.word", true},
		{"truthy true", "n.yes", true},
		// paths into lists and maps
		{"list index", "order.items.0 == 'a'", true},
		{"list index second", "order.items.1 == 'b'", true},
		{"list index out of range is missing", "order.items.5 == null", true},
		{"nested list item field", "order.lines.2.sku == 'Z'", true},
		{"numeric segment on map is a key", "n.byname.0 == 'zero-key'", true},
		{"name segment on list finds nothing", "order.items.first == null", true},
		{"segment under scalar finds nothing", "n.word.x == null", true},
		// roots
		{"run params read in when", "run.params.region == 'emea'", true},
		{"run params number", "run.params.limit >= 10", true},
		{"run params missing == null", "run.params.absent == null", true},
		{"settlement failed", "$settlement.charge.failed == true", true},
		{"settlement rejections", "$settlement.charge.validation_rejections == 2", true},
		{"settlement of skipped step == null", "$settlement.skipped_step.failed == null", true},
		{"settlement of skipped step == false", "$settlement.skipped_step.failed == false", false},
	}
	s := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := eval(t, FieldWhen, tt.text, s)
			if r.Passed != tt.want {
				t.Errorf("%q passed=%v want %v (resolved %#v present %v)", tt.text, r.Passed, tt.want, r.ResolvedValue, r.LHSPresent)
			}
			if r.ResolutionError {
				t.Errorf("when must never report a resolution error")
			}
			if r.Leaf != tt.text {
				t.Errorf("leaf %q want %q", r.Leaf, tt.text)
			}
		})
	}
}

// TestEvalFieldDifferences covers every row of the §7.4 table.
func TestEvalFieldDifferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		text       string
		field      Field
		want       bool
		resolveErr bool
	}{
		// path alone (refused at load for preconditions; still evaluated)
		{"path alone when", "n.yes", FieldWhen, true, false},
		{"path alone precondition truthiness", "n.yes", FieldPrecondition, true, false},
		{"path alone abort_unless", "n.yes", FieldAbortUnless, true, false},
		{"path alone abort_unless false", "n.no", FieldAbortUnless, false, false},
		// == null
		{"== null missing when", "n.absent == null", FieldWhen, true, false},
		{"== null present null when", "n.nul == null", FieldWhen, true, false},
		{"== null missing precondition false", "n.absent == null", FieldPrecondition, false, false},
		{"== null present null precondition false", "n.nul == null", FieldPrecondition, false, false},
		{"== null present null abort_unless false", "n.nul == null", FieldAbortUnless, false, false},
		{"!= null present precondition true", "n.word != null", FieldPrecondition, true, false},
		// run.params
		{"run params when", "run.params.region == 'emea'", FieldWhen, true, false},
		{"run params precondition false", "run.params.region == 'emea'", FieldPrecondition, false, false},
		{"run params abort_unless run fails", "run.params.region == 'emea'", FieldAbortUnless, false, true},
		// path that finds nothing
		{"nothing when false", "n.absent > 1", FieldWhen, false, false},
		{"nothing precondition false", "n.absent > 1", FieldPrecondition, false, false},
		{"nothing abort_unless run fails", "n.absent > 1", FieldAbortUnless, false, true},
		{"nothing abort_unless == null run fails", "n.absent == null", FieldAbortUnless, false, true},
		{"missing step abort_unless run fails", "ghost.x == 1", FieldAbortUnless, false, true},
		// path to a step not in depends_on: nothing special at evaluation
		{"other step precondition", "order.items.0 == 'a'", FieldPrecondition, true, false},
		{"other step abort_unless", "order.items.0 == 'a'", FieldAbortUnless, true, false},
		// ordinary comparisons behave as in when
		{"precondition comparison true", "n.twelve < 1000", FieldPrecondition, true, false},
		{"abort_unless comparison false", "n.word == 'hot'", FieldAbortUnless, false, false},
	}
	s := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := eval(t, tt.field, tt.text, s)
			if r.Passed != tt.want || r.ResolutionError != tt.resolveErr {
				t.Errorf("%s %q: passed=%v resolutionError=%v, want %v %v", tt.field, tt.text, r.Passed, r.ResolutionError, tt.want, tt.resolveErr)
			}
		})
	}
}

func TestEvalRecordsLeaf(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r := eval(t, FieldWhen, "n.twelve > 20", s)
	want := Result{Leaf: "n.twelve > 20", LHSPresent: true, ResolvedValue: 12.0, Passed: false}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v want %+v", r, want)
	}
	r = eval(t, FieldWhen, "n.absent == 'x'", s)
	want = Result{Leaf: "n.absent == 'x'"}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v want %+v", r, want)
	}
	r = eval(t, FieldPrecondition, "run.params.region == 'emea'", s)
	if r.LHSPresent || r.ResolvedValue != nil {
		t.Errorf("precondition must not read run.params: %+v", r)
	}
}

func TestEvalAll(t *testing.T) {
	t.Parallel()
	s := Scope{Outputs: map[string]any{"score": map[string]any{"tier": "hot", "points": 85}}}
	parse := func(texts ...string) []*Condition {
		var cs []*Condition
		for _, tx := range texts {
			c, err := ParseFor("abort_unless", tx)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		return cs
	}
	tests := []struct {
		name       string
		field      Field
		conds      []*Condition
		want       bool
		wantPassed []bool
	}{
		{"all true passes (spec guard example)", FieldAbortUnless, parse("score.tier == 'hot'", "score.points >= 80"), true, []bool{true, true}},
		{"one false fails and all are recorded", FieldAbortUnless, parse("score.tier == 'cold'", "score.points >= 80"), false, []bool{false, true}},
		{"resolution error fails", FieldAbortUnless, parse("score.absent", "score.points >= 80"), false, []bool{false, true}},
		{"empty list passes", FieldWhen, nil, true, []bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ok, rs := EvalAll(tt.field, tt.conds, s)
			if ok != tt.want || len(rs) != len(tt.wantPassed) {
				t.Fatalf("got %v %+v", ok, rs)
			}
			for i, r := range rs {
				if r.Passed != tt.wantPassed[i] {
					t.Errorf("result %d passed=%v want %v", i, r.Passed, tt.wantPassed[i])
				}
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"text in JSON quotes", Result{LHSPresent: true, ResolvedValue: "discard"}, `[lhs → "discard"]`},
		{"integer", Result{LHSPresent: true, ResolvedValue: 12.0}, `[lhs → 12]`},
		{"bool", Result{LHSPresent: true, ResolvedValue: true}, `[lhs → true]`},
		{"null", Result{LHSPresent: true}, `[lhs → null]`},
		{"missing", Result{}, `[lhs → missing]`},
		{"html not escaped", Result{LHSPresent: true, ResolvedValue: "<a&b>"}, `[lhs → "<a&b>"]`},
		{"map compact", Result{LHSPresent: true, ResolvedValue: map[string]any{"k": []any{1.0}}}, `[lhs → {"k":[1]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Describe(tt.r); got != tt.want {
				t.Errorf("got %q want %q", got, tt.want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	type rec struct{}
	tests := []struct {
		name   string
		v      any
		path   []string
		want   any
		wantOK bool
	}{
		{"empty path returns value", 5, nil, 5, true},
		{"map key", map[string]any{"a": 1}, []string{"a"}, 1, true},
		{"present null", map[string]any{"a": nil}, []string{"a"}, nil, true},
		{"absent key", map[string]any{}, []string{"a"}, nil, false},
		{"list index", []any{"x", "y"}, []string{"1"}, "y", true},
		{"negative index finds nothing", []any{"x"}, []string{"-1"}, nil, false},
		{"typed string map", map[string]string{"a": "b"}, []string{"a"}, "b", true},
		{"typed slice", []string{"p", "q"}, []string{"0"}, "p", true},
		{"typed nested map", map[string]map[string]any{"s": {"failed": true}}, []string{"s", "failed"}, true, true},
		{"walk through nil", map[string]any{"a": nil}, []string{"a", "b"}, nil, false},
		{"struct finds nothing", rec{}, []string{"a"}, nil, false},
		{"huge index finds nothing", []any{1}, []string{"99999999999999999999"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Lookup(tt.v, tt.path)
			if ok != tt.wantOK || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v %v want %#v %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"a.x == 1", "a.x == 1 and a.y == 2", "run.params.r == 'x'", "$settlement.s.failed == true",
		"a..b", "", "'", "a == '", `a.x == "q"`, "a.b.0 >= -1.5", "x or y", "$settlement", "a.x<>1",
		"a.x == 'and' or", "and", "  ", "a.x=='\"'",
	} {
		f.Add(seed)
	}
	s := Scope{
		Outputs:    map[string]any{"a": map[string]any{"x": 1.0, "b": []any{map[string]any{"0": 1}}}},
		Params:     map[string]any{"r": "x"},
		Settlement: map[string]map[string]any{"s": {"failed": true}},
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseFor("when", text)
		if err != nil {
			if c != nil {
				t.Fatalf("error with non-nil condition")
			}
			if !strings.HasPrefix(err.Error(), "'when' ") {
				t.Fatalf("error without field prefix: %q", err.Error())
			}
			return
		}
		for _, fld := range []Field{FieldWhen, FieldPrecondition, FieldAbortUnless} {
			r := c.Eval(fld, s)
			_ = Describe(r)
		}
	})
}
