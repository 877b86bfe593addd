package drive

import (
	"reflect"
	"testing"
)

// A step is driven again in one drive when its slot was lost mid-call;
// its structured-output ⚠ line is still said only the first time.
func TestTheStrictLineIsSaidOncePerStepInADrive(t *testing.T) {
	t.Parallel()
	d := &driver{strictWarned: map[string]bool{}}
	info := stepInfo{strictNote: "  ⚠ Step 'a': structured_output: strict — sent, with caveats: x."}
	var said [][]string
	for range 3 {
		said = append(said, d.strictNoteOnce("a", info))
	}
	if want := [][]string{{info.strictNote}, nil, nil}; !reflect.DeepEqual(said, want) {
		t.Errorf("lines per drive of step a = %q, want %q", said, want)
	}
	if got := d.strictNoteOnce("b", stepInfo{}); got != nil {
		t.Errorf("a step without a note says %q", got)
	}
}
