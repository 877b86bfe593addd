package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// An answer sent as params_json (JSON bytes, what the front doors send)
// is the same answer as one sent as a Struct: same reply, same output
// recorded.
func TestParamsJSONIsTheSameAnswerAsParams(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	a.register(t, readFile(t, "testdata/support.yaml"))
	answer := map[string]any{"reply": "Hi, é.", "n": 1.5, "tags": []any{"a", true, nil}}

	byStruct := start(t, a, "support", nil).GetRunId()
	viaStruct := step(t, a, byStruct, "draft", answer)
	byJSON := start(t, a, "support", nil).GetRunId()
	resp, err := a.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: byJSON, Command: "draft",
		ParamsJson: []byte(`{"tags":["a",true,null], "n":1.5, "reply":"Hi, \u00e9."}`)})
	if err != nil {
		t.Fatal(err)
	}
	viaJSON := resp.GetReply()
	if viaJSON.GetStatus() != viaStruct.GetStatus() || viaJSON.GetGate().GetStepName() != viaStruct.GetGate().GetStepName() {
		t.Fatalf("params_json reply %v, Struct reply %v", viaJSON, viaStruct)
	}
	// The gate shows the answer it holds.
	got, want := viaJSON.GetGate().GetPreview(), viaStruct.GetGate().GetPreview()
	if want == nil || !proto.Equal(got, want) {
		t.Fatalf("gate preview from params_json %v, from params %v", got, want)
	}
}

// params_json that is not one JSON object, or sent beside params, is
// refused as an invalid argument, and the run is not written.
func TestParamsJSONThatIsNotAnObjectIsRefused(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	a.register(t, readFile(t, "testdata/support.yaml"))
	run := start(t, a, "support", nil).GetRunId()
	before := state(t, a, run).GetRunVersion()
	for name, tc := range map[string]struct {
		req  *realmv1.ExecuteStepRequest
		want string
	}{
		"an array":      {&realmv1.ExecuteStepRequest{ParamsJson: []byte(`[{"reply":"x"}]`)}, "must be a JSON object"},
		"null":          {&realmv1.ExecuteStepRequest{ParamsJson: []byte(`null`)}, "must be a JSON object"},
		"not JSON":      {&realmv1.ExecuteStepRequest{ParamsJson: []byte(`{"reply":`)}, "must be a JSON object"},
		"two values":    {&realmv1.ExecuteStepRequest{ParamsJson: []byte(`{"reply":"x"} {}`)}, "must be a JSON object"},
		"both set":      {&realmv1.ExecuteStepRequest{ParamsJson: []byte(`{"reply":"x"}`), Params: params(t, map[string]any{"reply": "x"})}, "both set"},
		"a string only": {&realmv1.ExecuteStepRequest{ParamsJson: []byte(`"x"`)}, "must be a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.req.RunId, tc.req.Command = run, "draft"
			_, err := a.client.ExecuteStep(ctx(t), tc.req)
			if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("err = %v, want InvalidArgument saying %q", err, tc.want)
			}
		})
	}
	if v := state(t, a, run).GetRunVersion(); v != before {
		t.Errorf("a refused answer wrote the run: version %d → %d", before, v)
	}
}
