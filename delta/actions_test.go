package delta

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestActionsRoundTrip: every golden commit line parses; known actions
// re-encode and re-parse to the same values, unknown ones verbatim.
func TestActionsRoundTrip(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*", "_delta_log", "*.json"))
	if len(files) < 20 {
		t.Fatalf("golden tables not found under %s", goldenDir)
	}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		actions, err := ParseActions(f, data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		enc, err := EncodeActions(actions)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseActions(f, enc)
		if err != nil || len(again) != len(actions) {
			t.Fatalf("%s: reparse %v (%d vs %d)", f, err, len(again), len(actions))
		}
		enc2, _ := EncodeActions(again)
		if string(enc) != string(enc2) {
			t.Errorf("%s: encoding is not stable:\n%s\n%s", f, enc, enc2)
		}
	}
}

func TestParseActionsEdgeCases(t *testing.T) {
	in := "{\"futureAction\":{\"path\":\"x\"}}\n\n{\"add\":{\"path\":\"a<b>&.parquet\",\"partitionValues\":{\"p\":null},\"size\":1,\"modificationTime\":2,\"dataChange\":true,\"unknownField\":3}}\n"
	actions, err := ParseActions("x.json", []byte(in))
	if err != nil || len(actions) != 2 {
		t.Fatalf("%v %v", actions, err)
	}
	if string(actions[0].Unknown) != `{"futureAction":{"path":"x"}}` {
		t.Errorf("unknown action not kept: %q", actions[0].Unknown)
	}
	if v, ok := actions[1].Add.PartitionValues["p"]; !ok || v != nil {
		t.Errorf("null partition value: %v %v", v, ok)
	}
	enc, _ := EncodeActions(actions)
	if !strings.Contains(string(enc), `"path":"a<b>&.parquet"`) || !strings.Contains(string(enc), `"partitionValues":{"p":null}`) {
		t.Errorf("encoding: %s", enc)
	}
	// A cdc action (Spark's, from its UPDATE) parses, and encodes back as
	// Spark wrote it.
	cdc := `{"cdc":{"path":"_change_data/cdc-00000-7d575834-3db8-42fd-b7fd-d1cba280e5b2.c000.snappy.parquet","partitionValues":{},"size":1042,"dataChange":false}}`
	actions, err = ParseActions("x.json", []byte(cdc))
	if err != nil || len(actions) != 1 || actions[0].Cdc == nil || actions[0].Cdc.Size != 1042 || actions[0].Unknown != nil {
		t.Fatalf("cdc action: %+v %v", actions, err)
	}
	if enc, _ := EncodeActions(actions); string(enc) != cdc+"\n" {
		t.Errorf("cdc action encodes as %s, want %s", enc, cdc)
	}
	for _, bad := range []string{"{\"add\":{}}", "{\"cdc\":{\"size\":1}}", "[1,2]", "{\"txn\":{\"version\":1}}", "{\"add\":{\"path\":"} {
		var cle *CorruptLogError
		if _, err := ParseActions("bad.json", []byte("{\"protocol\":{\"minReaderVersion\":1,\"minWriterVersion\":2}}\n"+bad)); !errors.As(err, &cle) || cle.Line != 2 {
			t.Errorf("%s: got %v, want CorruptLogError at line 2", bad, err)
		}
	}
	// Required maps are written as {} and [] even when empty.
	enc, _ = EncodeActions([]Action{{MetaData: &Metadata{ID: "x", SchemaString: "{}"}}, {Add: &Add{Path: "f"}}})
	for _, want := range []string{`"options":{}`, `"partitionColumns":[]`, `"configuration":{}`, `"partitionValues":{}`} {
		if !strings.Contains(string(enc), want) {
			t.Errorf("%s missing in %s", want, enc)
		}
	}
}
