package identity

import (
	"errors"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func TestAmbientNamesTheProgram(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		name, operator, by, source, why string
	}{
		{name: "operator stated", operator: " ops@server-1 ", by: "ops@server-1", source: "ambient"},
		{name: "derived without it", source: "derived"},
		{name: "too long", operator: strings.Repeat("x", 201), why: "longer than 200 characters"},
		{name: "control character", operator: "ops\x07", why: "contains a control character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := Ambient(env(map[string]string{OperatorEnv: c.operator, "USER": "u"}), realmv1.Channel_CHANNEL_RUN)
			var oe *OperatorError
			switch {
			case c.why != "":
				if !errors.As(err, &oe) || oe.Why != c.why || !strings.HasPrefix(err.Error(), "REALM_OPERATOR: "+c.why+"; nothing was done.") {
					t.Fatalf("err = %v", err)
				}
			case err != nil:
				t.Fatal(err)
			case got.GetBySource() != c.source || c.by != "" && got.GetBy() != c.by || got.GetBy() == "" || got.GetChannel() != realmv1.Channel_CHANNEL_RUN:
				t.Errorf("caller = %v", got)
			}
		})
	}
}
