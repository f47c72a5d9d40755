package storage_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// probeLeavesNothing checks that the probe deleted its object.
func probeLeavesNothing(t *testing.T, s storage.Store) {
	t.Helper()
	left, err := s.List(t.Context(), storage.ProbeDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("probe left %v behind", left)
	}
}

// withEndpoint is a store that names its server, as S3 does.
type withEndpoint struct{ storage.Store }

func (withEndpoint) Endpoint() string { return "http://s3.example:9000" }

// TestProbePutIfAbsent: stores that honour put-if-absent pass; one that
// overwrites (a server ignoring If-None-Match) is ErrNotAtomic, named.
func TestProbePutIfAbsent(t *testing.T) {
	local, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []storage.Store{storage.NewMem(), local} {
		if err := storage.ProbePutIfAbsent(t.Context(), s); err != nil {
			t.Errorf("%s: %v", s.URI(), err)
		}
		probeLeavesNothing(t, s)
	}

	f := storage.NewFaulty(storage.NewMem())
	f.IgnorePutIfAbsent(true)
	err = storage.ProbePutIfAbsent(t.Context(), f)
	if !errors.Is(err, storage.ErrNotAtomic) || !strings.Contains(err.Error(), f.URI()) {
		t.Fatalf("err = %v, want ErrNotAtomic naming %s", err, f.URI())
	}
	probeLeavesNothing(t, f)

	// An S3 store's error names its server, which its URI leaves out.
	err = storage.ProbePutIfAbsent(t.Context(), withEndpoint{f})
	if !errors.Is(err, storage.ErrNotAtomic) || !strings.Contains(err.Error(), "endpoint http://s3.example:9000") {
		t.Fatalf("err = %v, want ErrNotAtomic naming the endpoint", err)
	}

	// A store that cannot be written at all says so, not ErrNotAtomic.
	f.Reset()
	f.Fail(storage.Rule{Op: storage.OpPutIfAbsent})
	if err := storage.ProbePutIfAbsent(t.Context(), f); !errors.Is(err, storage.ErrInjected) || errors.Is(err, storage.ErrNotAtomic) {
		t.Fatalf("err = %v, want the injected error", err)
	}
}

// TestProbePutIfAbsentMinIO: MinIO checks If-None-Match, so the probe
// passes; the endpoint shows in the store's description.
func TestProbePutIfAbsentMinIO(t *testing.T) {
	cfg := testenv.MinIO(t)
	cfg.Prefix = "tables/probe"
	s := newS3(t, cfg)
	if err := storage.ProbePutIfAbsent(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	probeLeavesNothing(t, s)
	if !strings.Contains(s.Endpoint(), cfg.Endpoint) {
		t.Errorf("endpoint %q does not name %q", s.Endpoint(), cfg.Endpoint)
	}
}
