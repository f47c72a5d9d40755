package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

func newS3(t *testing.T, cfg storage.S3Config) *storage.S3 {
	t.Helper()
	s, err := storage.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The conflict must come from the server's If-None-Match check, and keep the
// S3 response for logs. MinIO answers 412 PreconditionFailed, also under a
// race (no 409 ConditionalRequestConflict as AWS may give).
func TestS3PutIfAbsentStatus(t *testing.T) {
	s := newS3(t, testenv.MinIO(t))
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	err := s.PutIfAbsent(ctx, "k", []byte("2"))
	var resp minio.ErrorResponse
	if !errors.Is(err, storage.ErrExist) || !errors.As(err, &resp) {
		t.Fatalf("err = %v, want ErrExist wrapping a minio.ErrorResponse", err)
	}
	if resp.StatusCode != 412 || resp.Code != "PreconditionFailed" {
		t.Errorf("conflict answered %d %s, want 412 PreconditionFailed", resp.StatusCode, resp.Code)
	}

	// Under a race, record every code seen.
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			err := s.PutIfAbsent(ctx, "race", fmt.Appendf(nil, "%d", i))
			var resp minio.ErrorResponse
			code := "ok"
			if errors.As(err, &resp) {
				code = fmt.Sprintf("%d %s", resp.StatusCode, resp.Code)
			} else if err != nil {
				code = err.Error()
			}
			mu.Lock()
			seen[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("PutIfAbsent race answers: %v", seen)
	if seen["ok"] != 1 {
		t.Errorf("race: %d winners, want 1 (%v)", seen["ok"], seen)
	}
}

// Two stores on one bucket with different prefixes do not see each other,
// and keys are relative to the prefix.
func TestS3PrefixIsolation(t *testing.T) {
	cfg := testenv.MinIO(t)
	ctx := t.Context()
	cfg.Prefix = "/t1/" // slashes are trimmed
	a := newS3(t, cfg)
	cfg.Prefix = "t2"
	b := newS3(t, cfg)
	cfg.Prefix = ""
	root := newS3(t, cfg)
	if err := a.Put(ctx, "_delta_log/0.json", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "_delta_log/0.json", []byte("b")); err != nil {
		t.Fatal(err)
	}
	infos, err := a.List(ctx, "", "")
	if err != nil || len(infos) != 1 || infos[0].Key != "_delta_log/0.json" {
		t.Fatalf("a.List = %v, %v", infos, err)
	}
	infos, err = root.List(ctx, "", "")
	var got []string
	for _, i := range infos {
		got = append(got, i.Key)
	}
	if want := []string{"t1/_delta_log/0.json", "t2/_delta_log/0.json"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("root.List = %q, %v; want %q", got, err, want)
	}
	if a.URI() != "s3://"+cfg.Bucket+"/t1" {
		t.Errorf("URI() = %q", a.URI())
	}
}

// A missing bucket is a configuration error, never "the table is empty".
func TestS3MissingBucketIsNotNotExist(t *testing.T) {
	cfg := testenv.MinIO(t)
	cfg.Bucket += "-missing"
	s := newS3(t, cfg)
	ctx := t.Context()
	if _, err := s.Get(ctx, "_delta_log/0.json"); err == nil || errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Get on missing bucket: err = %v, want a non-ErrNotExist error", err)
	}
	if _, err := s.List(ctx, "_delta_log/", ""); err == nil {
		t.Errorf("List on missing bucket: no error")
	}
}

// The secret key must not leak through formatting or errors.
func TestS3NoSecretInOutput(t *testing.T) {
	cfg := storage.S3Config{Endpoint: "127.0.0.1:1", AccessKey: "ak", SecretKey: "s3cr3t-value", Bucket: "b"}
	s := newS3(t, cfg)
	for _, out := range []string{
		fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%v", &cfg),
		fmt.Sprint(s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), s.URI(),
	} {
		if strings.Contains(out, string(cfg.SecretKey)) {
			t.Errorf("secret in %q", out)
		}
	}

	live := testenv.MinIO(t)
	live.SecretKey = "wrong-" + live.SecretKey
	_, err := newS3(t, live).Get(t.Context(), "x")
	if err == nil || strings.Contains(err.Error(), string(live.SecretKey)) {
		t.Errorf("wrong secret: err = %v", err)
	}
}

// Reads of an object replaced after Open fail instead of mixing versions.
func TestS3OpenReplaced(t *testing.T) {
	s := newS3(t, testenv.MinIO(t))
	ctx := t.Context()
	if err := s.Put(ctx, "f", []byte("version one")); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := make([]byte, 7)
	if _, err := r.ReadAt(p, 0); err != nil || string(p) != "version" {
		t.Fatalf("ReadAt = %q, %v", p, err)
	}
	if err := s.Put(ctx, "f", []byte("VERSION TWO")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.ReadAt(p, 4); err == nil {
		t.Errorf("ReadAt after replace = %q, nil; want an error", p[:n])
	}
}

// A CA file is for HTTPS: with a plain-HTTP endpoint, or unreadable, NewS3
// refuses it rather than silently ignoring it.
func TestS3CAFileChecks(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  storage.S3Config
		want string
	}{
		{storage.S3Config{Endpoint: "http://127.0.0.1:9", Bucket: "b", CAFile: ca}, "needs HTTPS"},
		{storage.S3Config{Endpoint: "127.0.0.1:9", Bucket: "b", CAFile: ca}, "needs HTTPS"},
		{storage.S3Config{Endpoint: "https://127.0.0.1:9", Bucket: "b", CAFile: ca}, "no PEM certificates"},
		{storage.S3Config{Endpoint: "127.0.0.1:9", Secure: true, Bucket: "b", CAFile: ca + ".missing"}, "no such file"},
	} {
		if _, err := storage.NewS3(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewS3(%v): %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
}

// TestS3KeyLimits: MinIO takes what storage.Limits promises, a 255-byte
// segment and a key of Limits().Key bytes under the prefix, and refuses a
// 256-byte segment and a longer key with an error IsKeyRejected knows, so
// the limits the mapper checks are the server's.
func TestS3KeyLimits(t *testing.T) {
	cfg := testenv.MinIO(t)
	cfg.Prefix = "limits/table"
	s := newS3(t, cfg)
	lim := storage.Limits(s)
	if lim.Key != 1024-len("limits/table/") || lim.Segment != 255 {
		t.Fatalf("limits %+v", lim)
	}
	ctx := t.Context()
	seg := func(n int) string { return strings.Repeat("s", n) }
	longest := seg(255) + "/" + seg(255) + "/" + seg(255) + "/"
	longest += seg(lim.Key - len(longest))
	for _, key := range []string{"d=" + seg(253) + "/f", longest} {
		if err := s.Put(ctx, key, []byte("ok")); err != nil {
			t.Errorf("%d-byte key within the limits: %v", len(key), err)
		}
	}
	for _, key := range []string{"d=" + seg(254) + "/f", longest + "x"} {
		if err := s.Put(ctx, key, []byte("no")); !storage.IsKeyRejected(err) || !storage.IsPermanent(err) {
			t.Errorf("%d-byte key past the limits: %v; want a rejected key", len(key), err)
		}
	}
}
