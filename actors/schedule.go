package actors

// schedule decides, for the committer, when CommitNow requests seal an
// epoch, with which reason, and which requests an epoch's end answers. It
// is plain state driven by the committer's events (a request, an epoch
// sealed, finished or dropped, the pipeline rebuilt); the committer passes
// whether an epoch runs and acts on the decisions. testdata/schedule.txt
// drives it event by event.
type schedule struct {
	waiters []chan error // answered when the current epoch ends
	queued  []chan error // answered when the next epoch ends
	// again is the reason of the epoch to seal as soon as the current one
	// ends, named by a request that came during it. (A full memory budget
	// asks once; dropped, reading would stall until the flush timer.)
	// After an abort it is the reason of the dropped epoch its waiters
	// wait on, redone once the pipeline is rebuilt.
	again string
}

// request takes a CommitNow; reply, if not nil, is answered when the epoch
// that holds what was read so far ends. With no epoch running it says to
// seal one now, for reason. During an epoch the first request names the
// next one, unless one somebody waits on (the control service, Stop,
// CatchUp) comes after ones nobody does (max_bytes, memory_budget).
func (s *schedule) request(reason string, reply chan error, running bool) (seal bool) {
	if reply != nil {
		s.queued = append(s.queued, reply)
	}
	if !running {
		return true
	}
	if s.again == "" || (reply != nil && len(s.queued) == 1) {
		s.again = reason
	}
	return false
}

// sealed records that an epoch was sealed: every queued request waits on
// it now.
func (s *schedule) sealed() {
	s.waiters, s.queued = append(s.waiters, s.queued...), nil
	s.again = ""
}

// finished answers the waiters of the epoch that ended with err, and says
// whether requests wait for another epoch (sealed at once, their rows were
// read after this one was sealed) and its reason.
func (s *schedule) finished(err error) (next bool, reason string) {
	for _, w := range s.waiters {
		w <- err
	}
	s.waiters = nil
	return len(s.queued) > 0 || s.again != "", s.reason()
}

// dropped records that the running epoch, sealed for reason, was dropped
// (an abort, a restart): its waiters wait for the next one, which says the
// dropped epoch's reason unless a request already named it.
func (s *schedule) dropped(reason string) {
	if len(s.waiters) > 0 && s.again == "" {
		s.again = reason
	}
	s.queued, s.waiters = append(s.waiters, s.queued...), nil
}

// rebuilt says whether requests wait for an epoch once a new pipeline
// runs, and its reason.
func (s *schedule) rebuilt() (seal bool, reason string) {
	return len(s.queued) > 0, s.reason()
}

// reason is the reason of an epoch sealed for pending requests: again's,
// else a plain request.
func (s *schedule) reason() string {
	if s.again != "" {
		return s.again
	}
	return reasonRequest
}
