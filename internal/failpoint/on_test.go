//go:build failpoints

package failpoint

import "testing"

// The spec selects points by name and hit number, SIGKILL by default or
// hang with ":hang".
func TestParseSpec(t *testing.T) {
	got := parse("upload=2:hang, commit=1")
	if len(got) != 2 {
		t.Fatalf("parsed %d points, want 2", len(got))
	}
	if p := got[0]; p.name != Upload || p.at != 2 || !p.hang {
		t.Errorf("first point %+v; want upload at hit 2, hanging", p)
	}
	if p := got[1]; p.name != Commit || p.at != 1 || p.hang {
		t.Errorf("second point %+v; want commit at hit 1, killing", p)
	}
}
