package delta

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/deltaflow/deltaflow/storage"
)

// TestLocate pins how a path from the log resolves against a table root:
// every spelling of one file gives the same key, files elsewhere stay
// outside, and what cannot be decoded is ErrBadPath.
func TestLocate(t *testing.T) {
	const bad = "bad"
	for _, tc := range []struct {
		root, path string
		key        string // want inside, this key
		outside    string // want outside, this canonical URI
		err        string // bad: want ErrBadPath
	}{
		// One file, every spelling (Spark's pathAsUri makes them equal).
		{root: "file:///t", path: "a%20b/x.parquet", key: "a b/x.parquet"},
		{root: "file:///t", path: "a b/x.parquet", key: "a b/x.parquet"},
		{root: "file:///t", path: "/t/a%20b/x.parquet", key: "a b/x.parquet"},
		{root: "file:///t", path: "file:/t/a%20b/x.parquet", key: "a b/x.parquet"},
		{root: "file:///t", path: "file:///t/a%20b/x.parquet", key: "a b/x.parquet"},
		{root: "file:///t", path: "file://localhost/t/a%20b/x.parquet", key: "a b/x.parquet"},
		{root: "file:///t", path: "FILE:///t/a%20b/x.parquet", key: "a b/x.parquet"},
		{root: "file:///t/", path: "file:///t/x.parquet", key: "x.parquet"},
		{root: "/t", path: "file:/t/x.parquet", key: "x.parquet"},
		// Partition directories are Hive-escaped, then URI-encoded.
		{root: "file:///t", path: "p=a%253Ab/x.parquet", key: "p=a%3Ab/x.parquet"},
		{root: "file:///t", path: "file:///t/p=a%253Ab/x.parquet", key: "p=a%3Ab/x.parquet"},
		{root: "file:///t", path: "p=1:2/x.parquet", key: "p=1:2/x.parquet"},
		// The store gives its root raw, paths come encoded.
		{root: "file:///tmp/my table", path: "file:///tmp/my%20table/x.parquet", key: "x.parquet"},
		// Outside the root: a sibling sharing a prefix, a parent, elsewhere.
		{root: "file:///t", path: "file:///t2/x.parquet", outside: "file:///t2/x.parquet"},
		{root: "file:///t", path: "/x.parquet", outside: "file:///x.parquet"},
		{root: "file:///t", path: "s3://b/t/x.parquet", outside: "s3://b/t/x.parquet"},
		{root: "file:///t", path: "hdfs://nn:8020/t/a%20b", outside: "hdfs://nn:8020/t/a b"},
		// S3: s3, s3a, s3n are one bucket; bucket and scheme case-insensitive.
		{root: "s3://bucket/prefix", path: "s3a://bucket/prefix/p=1/x.parquet", key: "p=1/x.parquet"},
		{root: "s3://bucket/prefix", path: "s3n://BUCKET/prefix/x.parquet", key: "x.parquet"},
		{root: "s3://bucket/prefix", path: "S3://bucket/prefix/x.parquet", key: "x.parquet"},
		{root: "s3a://bucket/prefix", path: "s3://bucket/prefix/x.parquet", key: "x.parquet"},
		{root: "s3://bucket/prefix", path: "/prefix/x.parquet", key: "x.parquet"},
		{root: "s3://bucket/prefix", path: "s3://bucket/prefix2/x.parquet", outside: "s3://bucket/prefix2/x.parquet"},
		{root: "s3://bucket/prefix", path: "s3://other/prefix/x.parquet", outside: "s3://other/prefix/x.parquet"},
		{root: "s3://bucket/prefix", path: "file:///prefix/x.parquet", outside: "file:///prefix/x.parquet"},
		{root: "s3://bucket", path: "s3a://bucket/x/y.parquet", key: "x/y.parquet"},
		// Cannot be placed.
		{root: "file:///t", path: "a%zz.parquet", err: bad},
		{root: "file:///t", path: "file:///t/a%zz.parquet", err: bad},
		{root: "file:///t", path: "../u/x.parquet", err: bad},
		{root: "file:///t", path: "a//x.parquet", err: bad},
		{root: "file:///t", path: "file:///t/../u/x.parquet", err: bad},
		{root: "file:///t", path: "file:x.parquet", err: bad},
		{root: "file:///t", path: "/t", err: bad}, // the root itself is no file
		{root: "s3://bucket/prefix", path: "s3://bucket", err: bad},
	} {
		got, err := newTableRoot(tc.root).locate(tc.path)
		switch {
		case tc.err != "":
			if !errors.Is(err, ErrBadPath) {
				t.Errorf("root %s: locate(%q) = %+v, %v; want ErrBadPath", tc.root, tc.path, got, err)
			}
		case err != nil:
			t.Errorf("root %s: locate(%q): %v", tc.root, tc.path, err)
		case tc.key != "" && got != pathID{kind: pathInside, path: tc.key}:
			t.Errorf("root %s: locate(%q) = %+v, want key %q", tc.root, tc.path, got, tc.key)
		case tc.outside != "" && got != pathID{kind: pathOutside, path: tc.outside}:
			t.Errorf("root %s: locate(%q) = %+v, want outside %q", tc.root, tc.path, got, tc.outside)
		}
	}
}

func TestTableRootKey(t *testing.T) {
	r := newTableRoot("file:///t")
	if k, err := r.key("file:/t/a%20b"); err != nil || k != "a b" {
		t.Errorf("key = %q, %v", k, err)
	}
	if _, err := r.key("file:///u/x.parquet"); !errors.Is(err, ErrOutsideTable) {
		t.Errorf("outside: %v", err)
	}
	if _, err := r.key("a%zz"); !errors.Is(err, ErrBadPath) {
		t.Errorf("bad: %v", err)
	}
	// An undecodable path keeps its raw form as its identity.
	if id := r.id("a%zz"); id != (pathID{kind: pathRaw, path: "a%zz"}) {
		t.Errorf("id = %+v", id)
	}
}

// TestDeletionVectorFile uses PROTOCOL.md's deletion vector examples
// ("Deletion Vector Descriptor Schema"), and the prefix-less one that
// delta-kernel tests with.
func TestDeletionVectorFile(t *testing.T) {
	const uuidFile = "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
	for _, tc := range []struct {
		root string
		dv   DeletionVector
		key  string // "" with ok: outside; with !ok: no file
		ok   bool
		bad  bool
	}{
		{root: "s3://mytable", dv: DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^"}, key: "ab/" + uuidFile, ok: true},
		{root: "s3://mytable", dv: DeletionVector{StorageType: "u", PathOrInlineDv: "vBn[lx{q8@P<9BNH/isA"},
			key: "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin", ok: true},
		{root: "s3://mytable", dv: DeletionVector{StorageType: "p", PathOrInlineDv: "s3://mytable/" + uuidFile}, key: uuidFile, ok: true},
		{root: "s3://other", dv: DeletionVector{StorageType: "p", PathOrInlineDv: "s3://mytable/" + uuidFile}, ok: true},
		{root: "s3://mytable", dv: DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"}},
		{root: "s3://mytable", dv: DeletionVector{StorageType: "u", PathOrInlineDv: "vBn[lx{q8@P<9BNH/is"}, bad: true},   // too short
		{root: "s3://mytable", dv: DeletionVector{StorageType: "u", PathOrInlineDv: "vBn[lx{q8@P<9BNH/is~"}, bad: true},  // not Z85
		{root: "s3://mytable", dv: DeletionVector{StorageType: "u", PathOrInlineDv: "#####vBn[lx{q8@P<9BNH"}, bad: true}, // overflows
		{root: "s3://mytable", dv: DeletionVector{StorageType: "u", PathOrInlineDv: "a//vBn[lx{q8@P<9BNH/isA"}, bad: true},
		{root: "s3://mytable", dv: DeletionVector{StorageType: "p", PathOrInlineDv: "s3://mytable/a%zz.bin"}, bad: true},
		{root: "s3://mytable", dv: DeletionVector{StorageType: "x", PathOrInlineDv: "whatever"}, bad: true},
	} {
		loc, ok, err := newTableRoot(tc.root).dvFile(&tc.dv)
		switch {
		case tc.bad:
			if !errors.Is(err, ErrBadPath) {
				t.Errorf("%+v: got %+v %v %v, want ErrBadPath", tc.dv, loc, ok, err)
			}
		case err != nil || ok != tc.ok:
			t.Errorf("%+v: ok %v, %v", tc.dv, ok, err)
		case ok && tc.key != "" && loc != pathID{kind: pathInside, path: tc.key}:
			t.Errorf("%+v: %+v, want key %q", tc.dv, loc, tc.key)
		case ok && tc.key == "" && loc.kind != pathOutside:
			t.Errorf("%+v: %+v, want outside", tc.dv, loc)
		}
	}
}

// TestZ85 uses the test vector of the Z85 spec (ZeroMQ RFC 32).
func TestZ85(t *testing.T) {
	got, err := z85Decode("HelloWorld")
	if want := "864fd26fb559f75b"; err != nil || hex.EncodeToString(got) != want {
		t.Errorf("z85Decode(HelloWorld) = %x, %v; want %s", got, err, want)
	}
	for _, bad := range []string{"Hell", "Hello World", "Hell~", "Hello\"orld", "%%%%%"} {
		if _, err := z85Decode(bad); err == nil {
			t.Errorf("z85Decode(%q) accepted", bad)
		}
	}
}

// FuzzLocate: resolving any path never panics; a key it gives is a valid
// storage key, and EncodePath of it, bare or behind any spelling of the
// root, resolves to the same file.
func FuzzLocate(f *testing.F) {
	for _, p := range []string{"a%20b/x.parquet", "file:/t/a b", "file:///t/p=a%253Ab/x", "/t/x", "s3a://b/t/x", "a%zz", "../x", "café/x", "p=1:2/x"} {
		f.Add(p)
	}
	r := newTableRoot("file:///t")
	f.Fuzz(func(t *testing.T, p string) {
		loc, err := r.locate(p)
		if err != nil || loc.kind != pathInside {
			return
		}
		if err := storage.CheckKey(loc.path); err != nil {
			t.Fatalf("locate(%q) = key %q: %v", p, loc.path, err)
		}
		enc := EncodePath(loc.path)
		for _, spelled := range []string{enc, "/t/" + enc, "file:/t/" + enc, "file:///t/" + enc, "file://localhost/t/" + enc} {
			if got := r.id(spelled); got != loc {
				t.Fatalf("locate(%q) = %+v, but %q is %+v", p, loc, spelled, got)
			}
		}
	})
}
