package realmtest

import (
	"context"
	"testing"
)

// Run runs every fixture in fixturesDir against the workflow at path, one
// subtest per fixture named after it, on a Suite of its own.
func Run(t testing.TB, path, fixturesDir string, o Options) []Result {
	t.Helper()
	fixtures, err := LoadFixturesFromDir(fixturesDir)
	if err != nil {
		t.Fatal(err)
	}
	s := OpenT(t, path, o)
	results := make([]Result, 0, len(fixtures))
	for _, f := range fixtures {
		res := s.Run(context.Background(), f)
		results = append(results, res)
		if tt, ok := t.(*testing.T); ok {
			tt.Run(f.Name, func(t *testing.T) {
				if !res.Passed {
					t.Errorf("%s: %s", f.File, res.Error)
				}
			})
		} else if !res.Passed {
			t.Errorf("%s (%s): %s", f.Name, f.File, res.Error)
		}
	}
	return results
}

// OpenT opens a Suite for a test and closes it when the test ends.
func OpenT(t testing.TB, path string, o Options) *Suite {
	t.Helper()
	s, err := Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
