package delta

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenDir holds the reference tables written by Spark and delta-rs
// (testdata/golden/README.md says where each comes from).
const goldenDir = "testdata/golden"

// TestEncodePathSchemeColon: a key whose first segment would read as a URI
// scheme has that colon encoded, so the path stays relative; colons
// elsewhere stay raw, as Spark writes them.
func TestEncodePathSchemeColon(t *testing.T) {
	for key, want := range map[string]string{
		"a+:b/x.parquet":      "a+%3Ab/x.parquet",
		"C:/x.parquet":        "C%3A/x.parquet",
		"p=a:b/x.parquet":     "p=a:b/x.parquet",
		"part-0:1.parquet":    "part-0%3A1.parquet",
		"dir/a:b.parquet":     "dir/a:b.parquet",
		"1a:b/x.parquet":      "1a:b/x.parquet", // a scheme starts with a letter
		"p=x/part-00.parquet": "p=x/part-00.parquet",
	} {
		if got := EncodePath(key); got != want {
			t.Errorf("EncodePath(%q) = %q, want %q", key, got, want)
		}
		if back, err := DecodePath(EncodePath(key)); err != nil || back != key {
			t.Errorf("DecodePath(EncodePath(%q)) = %q, %v", key, back, err)
		}
	}
}

func TestPartitionPathVectors(t *testing.T) {
	for _, tc := range []struct {
		value   *string
		dir     string
		addPath string
	}{
		{str("a:b"), "p=a%3Ab", "p=a%253Ab"},
		{str("2013-07-05 17:01:00.123456"), "p=2013-07-05 17%3A01%3A00.123456", "p=2013-07-05%2017%253A01%253A00.123456"},
		{str("bar+%21"), "p=bar+%2521", "p=bar+%252521"},
		{str("../../etc"), "p=..%2F..%2Fetc", "p=..%252F..%252Fetc"},
		{str("a/b"), "p=a%2Fb", "p=a%252Fb"},
		{str("x=y"), "p=x%3Dy", "p=x%253Dy"},
		{str("%2F"), "p=%252F", "p=%25252F"},
		{str("line\nbreak"), "p=line%0Abreak", "p=line%250Abreak"},
		{str("nul\x00"), "p=nul%00", "p=nul%2500"},
		{str("sp ace ü 🔌"), "p=sp ace ü 🔌", "p=sp%20ace%20ü%20🔌"},
		{str(`q"#'*?\{[]^}`), `p=q%22%23%27%2A%3F%5C%7B%5B%5D%5E}`, `p=q%2522%2523%2527%252A%253F%255C%257B%255B%255D%255E%7D`},
		{nil, "p=__HIVE_DEFAULT_PARTITION__", "p=__HIVE_DEFAULT_PARTITION__"},
		{str(""), "p=__HIVE_DEFAULT_PARTITION__", "p=__HIVE_DEFAULT_PARTITION__"},
	} {
		dir := PartitionDir([]string{"p"}, map[string]*string{"p": tc.value})
		if dir != tc.dir {
			t.Errorf("dir(%q) = %q, want %q", deref(tc.value), dir, tc.dir)
		}
		if got := EncodePath(dir); got != tc.addPath {
			t.Errorf("add.path(%q) = %q, want %q", deref(tc.value), got, tc.addPath)
		}
		key, err := DecodePath(EncodePath(dir + "/f.parquet"))
		if err != nil || key != dir+"/f.parquet" {
			t.Errorf("DecodePath round trip of %q: %q %v", dir, key, err)
		}
		if strings.Count(dir, "/") != 0 {
			t.Errorf("dir %q has more than one segment", dir)
		}
	}
	for _, bad := range []string{"../x.parquet", "a/../../x", "/etc/passwd", "s3://bucket/x.parquet", "a//b"} {
		if _, err := DecodePath(bad); err == nil {
			t.Errorf("DecodePath(%q) accepted a path outside the table", bad)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestSparkPartitionPaths rebuilds the add.path directory of every
// Spark-written golden file from its partitionValues.
func TestSparkPartitionPaths(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "spark-*", "_delta_log", "*.json"))
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		actions, err := ParseActions(f, data)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, a := range actions {
			if a.MetaData != nil {
				cols = a.MetaData.PartitionColumns
			}
			if a.Add == nil || len(a.Add.PartitionValues) == 0 || cols == nil {
				continue
			}
			dir := EncodePath(PartitionDir(cols, a.Add.PartitionValues))
			if !strings.HasPrefix(a.Add.Path, dir+"/") {
				t.Errorf("%s: add.path %q does not start with %q", f, a.Add.Path, dir)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("only %d partitioned adds checked", checked)
	}
}
