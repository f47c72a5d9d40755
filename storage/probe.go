package storage

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// ErrNotAtomic is returned (wrapped) by ProbePutIfAbsent when a store let a
// second PutIfAbsent of one key succeed: the server ignores If-None-Match,
// so two writers committing the same Delta version would both "win" and one
// commit would silently replace the other.
var ErrNotAtomic = errors.New("storage: put-if-absent is not atomic")

// ProbeDir is where ProbePutIfAbsent writes its probe objects: a hidden
// directory, which Delta readers never take for part of the table (the log
// is _delta_log/, data files are never under a '_' directory) and VACUUM
// leaves alone.
const ProbeDir = "_deltaflow/"

// ProbePutIfAbsent checks that s honours the PutIfAbsent contract: it writes
// a fresh probe object under ProbeDir twice and expects the second write to
// fail with ErrExist, then deletes the probe. A second write that succeeds
// is reported as ErrNotAtomic naming the store (and, for S3, the endpoint);
// any other failure is returned as it is, since the store then cannot be
// written anyway.
func ProbePutIfAbsent(ctx context.Context, s Store) (err error) {
	key := ProbeDir + "put-if-absent-probe-" + rand.Text()
	if err := s.PutIfAbsent(ctx, key, []byte("first")); err != nil {
		return fmt.Errorf("probe put-if-absent on %s: %w", describe(s), err)
	}
	defer func() {
		// The probe is gone even when ctx ended meanwhile.
		if derr := s.Delete(context.WithoutCancel(ctx), key); derr != nil && err == nil {
			err = fmt.Errorf("probe put-if-absent on %s: delete %s: %w", describe(s), key, derr)
		}
	}()
	switch err := s.PutIfAbsent(ctx, key, []byte("second")); {
	case err == nil:
		return fmt.Errorf("%w on %s: a second put-if-absent of %s replaced the first instead of failing",
			ErrNotAtomic, describe(s), key)
	case errors.Is(err, ErrExist):
		return nil
	default:
		return fmt.Errorf("probe put-if-absent on %s: %w", describe(s), err)
	}
}

// describe names a store for an error: its URI, and the endpoint of an S3
// store (the URI leaves the server out).
func describe(s Store) string {
	if e, ok := s.(interface{ Endpoint() string }); ok {
		return s.URI() + " (endpoint " + e.Endpoint() + ")"
	}
	return s.URI()
}
