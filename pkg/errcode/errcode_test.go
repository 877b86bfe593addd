package errcode

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

// jsonEntry mirrors one row of codes.json, read independently of the
// generator so this test also catches a generator that drops a field.
type jsonEntry struct {
	Code            string   `json:"code"`
	Category        string   `json:"category"`
	AgentAction     string   `json:"agent_action"`
	AlsoActions     []string `json:"also_actions"`
	Retryable       bool     `json:"retryable"`
	RetryableVaries bool     `json:"retryable_varies"`
	Raised          bool     `json:"raised"`
	GRPC            string   `json:"grpc"`
	Meaning         string   `json:"meaning"`
}

func readCatalogueJSON(t *testing.T) []jsonEntry {
	t.Helper()
	data, err := os.ReadFile("codes.json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []jsonEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestGeneratedTableMatchesCodesJSON(t *testing.T) {
	t.Parallel()
	entries := readCatalogueJSON(t)
	all := All()
	if len(all) != len(entries) {
		t.Fatalf("All() has %d entries, codes.json %d", len(all), len(entries))
	}
	for i, want := range entries {
		got := all[i]
		var wantGRPC codes.Code
		if err := wantGRPC.UnmarshalJSON([]byte(`"` + want.GRPC + `"`)); err != nil {
			t.Errorf("%s: grpc %q: %v", want.Code, want.GRPC, err)
		}
		also := make([]string, len(got.AlsoActions))
		for j, a := range got.AlsoActions {
			also[j] = string(a)
		}
		switch {
		case string(got.Code) != want.Code,
			string(got.Category) != want.Category,
			string(got.AgentAction) != want.AgentAction,
			!slices.Equal(also, want.AlsoActions) && len(also)+len(want.AlsoActions) > 0,
			got.Retryable != want.Retryable,
			got.RetryableVaries != want.RetryableVaries,
			got.Raised != want.Raised,
			got.GRPC != wantGRPC,
			got.Meaning != want.Meaning:
			t.Errorf("entry %d: generated %+v, codes.json %+v (run go generate)", i, got, want)
		}
	}
}

func TestEveryCodeHasValidMetadata(t *testing.T) {
	t.Parallel()
	for _, info := range All() {
		if !slices.Contains(Categories(), info.Category) {
			t.Errorf("%s: category %q", info.Code, info.Category)
		}
		if !slices.Contains(AgentActions(), info.AgentAction) {
			t.Errorf("%s: agent_action %q", info.Code, info.AgentAction)
		}
		for _, a := range info.AlsoActions {
			if !slices.Contains(AgentActions(), a) || a == info.AgentAction {
				t.Errorf("%s: also action %q", info.Code, a)
			}
		}
		if info.GRPC == codes.OK || info.GRPC > codes.Unauthenticated {
			t.Errorf("%s: gRPC code %v is not an error code", info.Code, info.GRPC)
		}
		if info.Meaning == "" || strings.Contains(info.Meaning, "\n") {
			t.Errorf("%s: meaning %q", info.Code, info.Meaning)
		}
	}
}

// The spec (§4, §5) lists 87 codes: 72 raised (1+7+25+11+26+2 by
// category) and 15 never raised. Realm (Go) raises more than the
// original: RESOURCE_TOO_LARGE, for its size limits (issue #18), and
// ENGINE_CONFIG_INVALID, a service's refusal to start (issue #21).
func TestCatalogueHoldsTheCodesTheSpecLists(t *testing.T) {
	t.Parallel()
	wantRaised := map[Category]int{
		CategoryNetwork: 1, CategoryService: 7, CategoryState: 25,
		CategoryValidation: 11, CategoryEngine: 29, CategoryResource: 3,
	}
	gotRaised := map[Category]int{}
	raised, never := 0, 0
	for _, info := range All() {
		if info.Raised {
			raised++
			gotRaised[info.Category]++
		} else {
			never++
		}
	}
	if raised != 76 || never != 14 {
		t.Errorf("raised %d, never raised %d; want 76 and 14", raised, never)
	}
	for c, n := range wantRaised {
		if gotRaised[c] != n {
			t.Errorf("raised %s codes: %d, want %d", c, gotRaised[c], n)
		}
	}
	neverRaised := []Code{
		NetworkTimeout, NetworkDNSFailed, NetworkConnectionReset, StatePreconditionFailed,
		StateRunLocked, RunAborting, ValidationHashMismatch, ValidationQuoteNotFound,
		ValidationFieldUnknown, ValidationFieldExcluded, StepHandlerError, EngineGateOpenFailed,
		GuardResolutionError, ResourceNotAccessible,
	}
	for _, c := range neverRaised {
		if info, ok := c.Info(); !ok || info.Raised {
			t.Errorf("%s: want a known, never-raised code; got %+v, %v", c, info, ok)
		}
	}
}

// The headline mapping rules of the brief, so a careless edit of
// codes.json cannot quietly break them.
func TestGRPCMappingFollowsTheRules(t *testing.T) {
	t.Parallel()
	for _, info := range All() {
		c := string(info.Code)
		var want codes.Code
		switch {
		case strings.HasPrefix(c, "VALIDATION_"):
			want = codes.InvalidArgument // including VALIDATION_QUOTE_NOT_FOUND: the caller's input is wrong
		case strings.HasSuffix(c, "_NOT_FOUND"):
			want = codes.NotFound
		case strings.HasPrefix(c, "NETWORK_"):
			want = codes.Unavailable
		default:
			continue
		}
		if info.GRPC != want {
			t.Errorf("%s maps to %v, want %v", c, info.GRPC, want)
		}
	}
	fixed := []struct {
		code Code
		want codes.Code
	}{
		{EngineInternal, codes.Internal},
		{EngineStoreFailed, codes.Unavailable},
		{StateSnapshotMismatch, codes.Aborted},
		{StateRunBusy, codes.Aborted},
		{StateRunTerminal, codes.FailedPrecondition},
		{StateTransitionDenied, codes.FailedPrecondition},
		{ServiceHTTP5xx, codes.Unavailable},
		{ResourceTooLarge, codes.ResourceExhausted},
		{StepTimeout, codes.DeadlineExceeded},
	}
	for _, tc := range fixed {
		if info, _ := tc.code.Info(); info.GRPC != tc.want {
			t.Errorf("%s maps to %v, want %v", tc.code, info.GRPC, tc.want)
		}
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		code      Code
		wantOK    bool
		category  Category
		action    AgentAction
		retryable bool
	}{
		{"known raised code", ValidationInputSchema, true, CategoryValidation, ActionProvideInput, false},
		{"retryable state code", StateSnapshotMismatch, true, CategoryState, ActionReportToUser, true},
		{"unprefixed code grouped under STATE", StepNotFound, true, CategoryState, ActionReportToUser, false},
		{"project code outside the catalogue", Code("RESOURCE_NOT_FOUND"), false, "", "", false},
		{"empty code", Code(""), false, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			info, ok := tc.code.Info()
			if ok != tc.wantOK || ok != tc.code.Known() {
				t.Fatalf("Info ok = %v, Known = %v, want %v", ok, tc.code.Known(), tc.wantOK)
			}
			if info.Category != tc.category || info.AgentAction != tc.action || info.Retryable != tc.retryable {
				t.Errorf("got %+v", info)
			}
			if ok && info.Code != tc.code {
				t.Errorf("Info().Code = %s", info.Code)
			}
		})
	}
}

func TestInfoReturnsACopyOfAlsoActions(t *testing.T) {
	t.Parallel()
	first, _ := StateBlocked.Info()
	if len(first.AlsoActions) == 0 {
		t.Fatal("STATE_BLOCKED should list other actions")
	}
	first.AlsoActions[0] = ActionStop
	second, _ := StateBlocked.Info()
	if second.AlsoActions[0] == ActionStop {
		t.Error("mutating a returned Info changed the catalogue")
	}
}
