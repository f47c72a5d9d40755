package scenario

import (
	"strings"
	"testing"
)

func TestTallyVerdicts(t *testing.T) {
	var r Report
	ta := &tally{parts: map[int32][]byte{}, r: &r}
	for off := range int64(10) {
		ta.produced(0, off)
		ta.produced(2, off)
	}
	for off := range int64(10) {
		if off != 3 { // p0@3 lost
			ta.see(0, off, "table")
		}
		ta.see(2, off, "table")
	}
	ta.see(0, 7, "dlq")    // p0@7 in the table and the DLQ
	ta.see(2, 9, "table")  // p2@9 written twice
	ta.see(2, 9, "table")  // …three times
	ta.see(1, 0, "table")  // a record the topic never held
	ta.see(0, 12, "table") // past the end of partition 0
	ta.finish()

	if r.Produced != 20 || r.Missing != 1 || r.Duplicates != 3 || r.Unexpected != 2 || r.OK() {
		t.Fatalf("report %v: want produced=20 missing=1 duplicates=3 unexpected=2, not OK", r)
	}
	for _, want := range []string{"p0@3 missing", "p0@7 stored 2 times", "p1@0 not in the topic"} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("report %q lacks %q", r, want)
		}
	}
}

func TestTallyExactlyOnceIsOK(t *testing.T) {
	var r Report
	ta := &tally{parts: map[int32][]byte{}, r: &r}
	for off := range int64(1000) {
		ta.produced(int32(off%3), off)
		ta.see(int32(off%3), off, "table")
	}
	ta.finish()
	if !r.OK() || r.Produced != 1000 {
		t.Fatalf("report %v: want OK with 1000 produced", r)
	}
}

func TestTallyCountSaturates(t *testing.T) {
	var r Report
	ta := &tally{parts: map[int32][]byte{}, r: &r}
	ta.produced(0, 0)
	for range 300 {
		ta.see(0, 0, "table")
	}
	ta.finish()
	if r.Duplicates != 126 || r.Unexpected != 0 {
		t.Fatalf("report %v: want the count to saturate at 127 copies (126 duplicates), not wrap", r)
	}
}
