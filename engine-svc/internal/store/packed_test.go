package store_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// A packed run is one hash: its outputs and evidence keys are gone.
func TestPackedRunIsOneHash(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{})
		id := s.NewRunID("")
		ev := slices.Repeat([][]byte{[]byte(`{"step_id":"s1","status":"success"}`)}, 10)
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
			Outputs: map[string][]byte{"s1": []byte(`1`)}, Evidence: ev}); err != nil {
			t.Fatal(err)
		}
		if packed, err := s.PackRun(ctx, id); err != nil || !packed {
			t.Fatalf("PackRun = %v, %v", packed, err)
		}
		if n := c.Exists(ctx, s.OutputsKey(id), s.EvidenceKey(id)).Val(); n != 0 {
			t.Fatalf("%d of the outputs and evidence keys left after packing", n)
		}
		fields := c.HKeys(ctx, s.RunKey(id)).Val()
		slices.Sort(fields)
		if want := []string{"g", "pk", "v"}; !slices.Equal(fields, want) {
			t.Fatalf("run hash fields %q, want %q", fields, want)
		}
	})
}

// Readers racing a run that is packed and unpacked over and over (each
// commit to the packed run unpacks it) never see it half packed: the
// document, the outputs and the evidence length always agree, and the
// evidence list is never short.
func TestReadsNeverSeeARunHalfPacked(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := newChecked(t, b, store.Options{})
		id := s.NewRunID("")
		entry := func(n int) []byte { return []byte(`{"n":` + strconv.Itoa(n) + `}`) }
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: entry(1),
			Outputs: map[string][]byte{"o1": entry(1)}, Evidence: [][]byte{entry(1)}}); err != nil {
			t.Fatal(err)
		}
		const rounds = 150
		var done atomic.Bool
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !done.Load() {
					if err := checkWhole(s, id); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for n := 1; n < rounds; n++ {
			if _, err := s.PackRun(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: int64(n - 1), NewVersion: int64(n), Doc: entry(n + 1),
				Outputs: map[string][]byte{"o" + strconv.Itoa(n+1): entry(n + 1)}, Evidence: [][]byte{entry(n + 1)}}); err != nil {
				t.Fatal(err)
			}
		}
		done.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if err := checkWhole(s, id); err != nil {
			t.Fatal(err)
		}
	})
}

// checkWhole reads the run of TestReadsNeverSeeARunHalfPacked: at {"n":k}
// it has outputs o1…ok and evidence {"n":1}…{"n":k}.
func checkWhole(s *store.Redis, id string) error {
	snap, err := s.LoadRun(ctx, id)
	if err != nil {
		return err
	}
	var doc struct{ N int64 }
	if err := json.Unmarshal(snap.Doc, &doc); err != nil {
		return err
	}
	if int64(len(snap.Outputs)) != doc.N || snap.EvidenceLen != doc.N {
		return fmt.Errorf("torn read: document at %d, %d outputs, evidence length %d", doc.N, len(snap.Outputs), snap.EvidenceLen)
	}
	ev, err := s.Evidence(ctx, id, 0, -1)
	if err != nil {
		return err
	}
	if int64(len(ev)) < doc.N {
		return fmt.Errorf("torn evidence read: %d entries after the document was at %d", len(ev), doc.N)
	}
	for i, e := range ev {
		if !bytes.Equal(e, []byte(`{"n":`+strconv.Itoa(i+1)+`}`)) {
			return fmt.Errorf("evidence entry %d is %s", i, e)
		}
	}
	return nil
}
