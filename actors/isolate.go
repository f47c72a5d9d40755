package actors

// isolateAfter is how many aborts in a row on a record fault (recordFault),
// with nothing committed between them, start an isolation: one may be a
// fluke, the second is the same records failing the same way.
const isolateAfter = 2

// isolation is the search for the record an epoch keeps failing on. Every
// epoch that reads it aborts the same way, so reading only part of the
// failing range tells which part holds it: a binary search over each
// suspect partition in turn, one partition read at a time (the others held)
// so their records cannot fail the step. A step reads [lo, step] of the
// partition searched: when it commits, those records were good (lo moves
// past them, committed); when it fails on a record fault, the record is in
// it (hi = step). Once lo == hi is known to fail, the culprit's step
// dead-letters that one record with the fault's reason and commits it.
//
// It is plain data, driven by the committer: plan says what the next
// generation reads, committed and failed report how its step ended.
type isolation struct {
	reason  string // the fault, for the culprit's letter
	parts   []tp   // suspect partitions, ascending; parts[0] is searched
	lo, hi  map[tp]int64
	failing bool  // [lo, hi] of parts[0] is known to fail
	step    int64 // the last offset the current step reads
	bare    bool  // the culprit's letter failed too: send it without key and value
}

// newIsolation starts a search over ranges (partition → first and last
// offset read when the epoch failed); nil when no range holds a record.
func newIsolation(reason string, ranges map[tp][2]int64) *isolation {
	s := &isolation{reason: reason, lo: map[tp]int64{}, hi: map[tp]int64{}}
	for _, p := range sortedTPs(ranges) {
		if r := ranges[p]; r[0] >= 0 && r[1] >= r[0] {
			s.parts = append(s.parts, p)
			s.lo[p], s.hi[p] = r[0], r[1]
		}
	}
	if len(s.parts) == 0 {
		return nil
	}
	return s
}

// culprit reports whether the current step dead-letters lo.
func (s *isolation) culprit() bool {
	p := s.parts[0]
	return s.failing && s.lo[p] == s.hi[p]
}

// plan is the next step: the partition read (every other one is held) and
// how far its reader goes.
func (s *isolation) plan() (tp, *readLimit) {
	p := s.parts[0]
	lo, hi := s.lo[p], s.hi[p]
	if s.culprit() {
		s.step = lo
		return p, &readLimit{last: lo, poison: lo, reason: s.reason, bare: s.bare}
	}
	s.step = lo + (hi-lo)/2
	return p, &readLimit{last: s.step, poison: -1}
}

// committed reports a commit of the searched partition during the step:
// next is its next offset in the table now. It reports whether the search
// is over: the culprit is dead-lettered, or no suspect range is left (the
// fault followed no record: the committer goes back to retrying as before).
func (s *isolation) committed(next int64) bool {
	p := s.parts[0]
	if s.culprit() {
		return next > s.lo[p]
	}
	// Up to step, or less when a timer sealed the epoch first.
	s.lo[p] = max(s.lo[p], next)
	if s.lo[p] > s.hi[p] {
		s.parts, s.failing = s.parts[1:], false
	}
	return len(s.parts) == 0
}

// failed reports the step's failure on a record fault; it reports whether
// to give up: the culprit's letter was refused even bare.
func (s *isolation) failed() bool {
	p := s.parts[0]
	if s.culprit() {
		if s.bare {
			return true
		}
		s.bare = true
		return false
	}
	s.hi[p], s.failing = s.step, true
	return false
}
