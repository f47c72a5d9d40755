package schemareg

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/deltaflow/deltaflow/mapping"
)

const readingV1 = `{"type":"record","name":"Reading","fields":[{"name":"id","type":"string"}]}`

// memStore is a Store in memory, standing in for the KV below its
// interface (the daemon's tests use the real one).
type memStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memStore) Load(context.Context) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.m {
		out[k] = v
	}
	return out, nil
}

func (s *memStore) Save(_ context.Context, k, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func newRegistry(t *testing.T, cfg Config, store Store) *Registry {
	t.Helper()
	r, err := New(t.Context(), cfg, store, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func noRetry(t *testing.T) func(error) {
	return func(err error) { t.Errorf("retried: %v", err) }
}

// A fetched schema is known to the mappers; an id the registry does not
// have is remembered as mapping.ErrSchemaNotFound (a dead letter), not
// retried; an unfetched id is not known.
func TestFetch(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	id, _, err := fake.RegisterSchema("readings-value", sr.Schema{Schema: readingV1})
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t, Config{URL: []string{fake.URL()}}, nil)
	if _, known, _ := r.Schema(id); known {
		t.Fatal("known before it was fetched")
	}
	if err := r.Fetch(t.Context(), id, noRetry(t)); err != nil {
		t.Fatal(err)
	}
	if s, known, err := r.Schema(id); !known || err != nil || s != (mapping.WriterSchema{Format: mapping.Avro, Text: readingV1}) {
		t.Fatalf("Schema(%d) = %+v, %v, %v", id, s, known, err)
	}
	if err := r.Fetch(t.Context(), 999, noRetry(t)); err != nil {
		t.Fatal(err)
	}
	if _, known, err := r.Schema(999); !known || !errors.Is(err, mapping.ErrSchemaNotFound) {
		t.Fatalf("Schema(999): known %v, err %v; want known, ErrSchemaNotFound", known, err)
	}
}

// A registry that fails is waited out: the failures are reported, and the
// schema is fetched once it answers.
func TestFetchWaitsOutAnOutage(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	id, _, err := fake.RegisterSchema("readings-value", sr.Schema{Schema: readingV1})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	down := true
	fake.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if down {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		}
		return down
	})
	r := newRegistry(t, Config{URL: []string{fake.URL()}}, nil)
	failures := 0
	err = r.Fetch(t.Context(), id, func(error) {
		if failures++; failures == 3 {
			mu.Lock()
			down = false
			mu.Unlock()
		}
	})
	if err != nil || failures != 3 {
		t.Fatalf("Fetch = %v after %d failures; want nil after 3", err, failures)
	}
	if _, known, _ := r.Schema(id); !known {
		t.Fatal("not known once fetched")
	}
}

// Wrong credentials end a fetch at once with ErrUnauthorized; the right
// ones are sent as basic auth.
func TestCredentials(t *testing.T) {
	fake := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("deltaflow:s3cret"))))
	defer fake.Close()
	fake.SeedSchema("readings-value", 1, 7, sr.Schema{Schema: readingV1})
	wrong := newRegistry(t, Config{URL: []string{fake.URL()}, User: "deltaflow", Password: "nope"}, nil)
	if err := wrong.Fetch(t.Context(), 7, noRetry(t)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Fetch with a wrong password = %v, want ErrUnauthorized", err)
	}
	if _, _, _, err := wrong.Latest(t.Context(), "readings-value"); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Latest with a wrong password = %v, want ErrUnauthorized", err)
	}
	right := newRegistry(t, Config{URL: []string{fake.URL()}, User: "deltaflow", Password: "s3cret"}, nil)
	if err := right.Fetch(t.Context(), 7, noRetry(t)); err != nil {
		t.Fatal(err)
	}
}

// What a registry gave is kept in the store: a new Registry over it
// decodes the ids and knows the subjects' latest schemas, and their
// formats, while the registry is down.
func TestStoreOutlivesTheRegistry(t *testing.T) {
	fake := srfake.New()
	store := &memStore{m: map[string]string{}}
	const alertV1 = `{"type":"object","properties":{"id":{"type":"string"}}}`
	subjects := map[string]mapping.WriterSchema{
		"readings-value": {Format: mapping.Avro, Text: readingV1},
		"alerts-value":   {Format: mapping.JSONSchema, Text: alertV1},
	}
	ids := map[string]int{}
	for subject, ws := range subjects {
		typ := sr.TypeAvro
		if ws.Format == mapping.JSONSchema {
			typ = sr.TypeJSON
		}
		id, _, err := fake.RegisterSchema(subject, sr.Schema{Type: typ, Schema: ws.Text})
		if err != nil {
			t.Fatal(err)
		}
		ids[subject] = id
	}
	first := newRegistry(t, Config{URL: []string{fake.URL()}}, store)
	for subject, want := range subjects {
		if id, got, stale, err := first.Latest(t.Context(), subject); err != nil || id != ids[subject] || stale || got != want {
			t.Fatalf("Latest(%s) = %d, %+v, stale %v, %v; want %d, %+v", subject, id, got, stale, err, ids[subject], want)
		}
	}
	fake.Close()

	second := newRegistry(t, Config{URL: []string{fake.URL()}, Timeout: time.Second}, store)
	for subject, want := range subjects {
		id := ids[subject]
		if got, known, err := second.Schema(id); !known || err != nil || got != want {
			t.Fatalf("Schema(%d) after a restart = %+v, %v, %v; want %+v", id, got, known, err, want)
		}
		got, ws, stale, err := second.Latest(t.Context(), subject)
		if err != nil || got != id || !stale || ws != want {
			t.Fatalf("Latest(%s) with the registry down = %d, %+v, stale %v, %v; want %d, the stored schema, stale", subject, got, ws, stale, err, id)
		}
	}
	if _, ok := store.m["id."+strconv.Itoa(ids["readings-value"])]; !ok {
		t.Errorf("an Avro schema is no longer stored under id.<n>, where earlier releases read it: %v", slices.Collect(maps.Keys(store.m)))
	}
}

// A schema of a format deltaflow does not read is a reason, not a retry.
func TestNotAvro(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	id, _, err := fake.RegisterSchema("readings-value", sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; message Reading { string id = 1; }`})
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t, Config{URL: []string{fake.URL()}}, nil)
	if err := r.Fetch(t.Context(), id, noRetry(t)); err != nil {
		t.Fatal(err)
	}
	if _, known, err := r.Schema(id); !known || err == nil || !strings.Contains(err.Error(), "PROTOBUF schema") {
		t.Fatalf("Schema of a Protobuf id: known %v, err %v", known, err)
	}
}
