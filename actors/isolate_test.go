package actors

import (
	"testing"

	"github.com/deltaflow/deltaflow/ledger"
)

// runIsolation drives an isolation against a partition log where reading
// any range holding an offset of poison fails (unless the step
// dead-letters it), as the committer would; it returns the offsets
// dead-lettered and the steps taken.
func runIsolation(t *testing.T, s *isolation, poison map[int32]map[int64]bool, table map[int32]int64) (dead map[int32]int64, steps int) {
	t.Helper()
	dead = map[int32]int64{}
	for steps = 1; steps < 100; steps++ {
		key, lim := s.plan()
		p := key.Partition
		fails := false
		for off := table[p]; off <= lim.last; off++ {
			if poison[p][off] && off != lim.poison {
				fails = true
			}
		}
		if fails {
			if s.failed() {
				t.Fatal("gave up")
			}
			continue
		}
		if lim.poison >= 0 {
			dead[p] = lim.poison
		}
		table[p] = lim.last + 1
		if s.committed(table[p]) {
			return dead, steps
		}
	}
	t.Fatal("no end after 100 steps")
	return nil, 0
}

func TestIsolationFindsTheRecord(t *testing.T) {
	table := map[int32]int64{0: 10, 1: 0, 2: 5}
	s := newIsolation("bad", ledger.Of(topic, map[int32][2]int64{0: {10, 1033}, 1: {0, 99}, 2: {5, 4}}))
	if len(s.parts) != 2 {
		t.Fatalf("suspects %v; partition 2 read nothing", s.parts)
	}
	dead, steps := runIsolation(t, s, map[int32]map[int64]bool{1: {57: true}}, table)
	if len(dead) != 1 || dead[1] != 57 {
		t.Fatalf("dead-lettered %v; want partition 1's offset 57", dead)
	}
	// Partition 0 cleared in ~log2(1024) commits, then partition 1 bisected.
	if steps > 2*11+9 {
		t.Errorf("%d steps; a bisection takes about log2 of the ranges", steps)
	}
	if table[0] != 1034 || table[1] != 58 {
		t.Errorf("table at %v; want partition 0 committed to its end, partition 1 past the culprit", table)
	}
}

func TestIsolationWithoutCulprit(t *testing.T) {
	s := newIsolation("not a record", ledger.Of(topic, map[int32][2]int64{0: {0, 9}}))
	dead, _ := runIsolation(t, s, nil, map[int32]int64{0: 0})
	if len(dead) != 0 {
		t.Fatalf("dead-lettered %v with no record at fault", dead)
	}
}

func TestIsolationBareLetter(t *testing.T) {
	s := newIsolation("too large", ledger.Of(topic, map[int32][2]int64{0: {3, 3}}))
	s.failing = true
	if _, lim := s.plan(); lim.poison != 3 || lim.bare {
		t.Fatalf("first culprit step %+v; want offset 3 with its record", lim)
	}
	if s.failed() {
		t.Fatal("gave up after one refused letter")
	}
	if _, lim := s.plan(); !lim.bare {
		t.Fatal("second culprit step not bare")
	}
	if !s.failed() {
		t.Fatal("did not give up when the bare letter was refused too")
	}
}
