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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

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

// serializedFile is a Protobuf file in the registry's serialized form.
func serializedFile(t *testing.T, fd *descriptorpb.FileDescriptorProto) string {
	t.Helper()
	b, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// A Protobuf schema is kept with the files its references name, fetched
// from their subjects: one FileDescriptorSet, dependencies first. One in
// .proto text the registry gives no serialized form of is a reason.
func TestProtobufReferences(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	common := &descriptorpb.FileDescriptorProto{Name: proto.String("common/unit.proto"), Package: proto.String("common"),
		Syntax: proto.String("proto3"), MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Unit")}}}
	reading := &descriptorpb.FileDescriptorProto{Name: proto.String("reading.proto"), Syntax: proto.String("proto3"),
		Dependency: []string{"common/unit.proto"}, MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Reading"),
			Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("unit"), Number: proto.Int32(1),
				Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".common.Unit"),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}}}}}
	if _, _, err := fake.RegisterSchema("common/unit.proto", sr.Schema{Type: sr.TypeProtobuf, Schema: serializedFile(t, common)}); err != nil {
		t.Fatal(err)
	}
	id, _, err := fake.RegisterSchema("readings-value", sr.Schema{Type: sr.TypeProtobuf, Schema: serializedFile(t, reading),
		References: []sr.SchemaReference{{Name: "common/unit.proto", Subject: "common/unit.proto", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := fake.RegisterSchema("texts-value", sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; message T { string a = 1; }`})
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t, Config{URL: []string{fake.URL()}}, nil)
	for _, id := range []int{id, text} {
		if err := r.Fetch(t.Context(), id, noRetry(t)); err != nil {
			t.Fatal(err)
		}
	}
	ws, known, err := r.Schema(id)
	if !known || err != nil || ws.Format != mapping.Protobuf {
		t.Fatalf("Schema(%d) = %v, %v, %v", id, ws.Format, known, err)
	}
	b, err := base64.StdEncoding.DecodeString(ws.Text)
	var set descriptorpb.FileDescriptorSet
	if err == nil {
		err = proto.Unmarshal(b, &set)
	}
	if err != nil || len(set.File) != 2 || set.File[0].GetName() != "common/unit.proto" || set.File[1].GetName() != "reading.proto" {
		t.Fatalf("the schema's files: %v, %v; want common/unit.proto, then reading.proto", err, set.File)
	}
	if _, known, err := r.Schema(text); !known || err == nil || !strings.Contains(err.Error(), "not a serialized file descriptor") {
		t.Errorf("a .proto text without a serialized form: known %v, %v", known, err)
	}
}
