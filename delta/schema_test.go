package delta

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSchemaStringRoundTrip: every golden schemaString parses and prints back
// byte for byte.
func TestSchemaStringRoundTrip(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*", "_delta_log", "*.json"))
	n := 0
	for _, f := range files {
		data, _ := os.ReadFile(f)
		actions, err := ParseActions(f, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range actions {
			if a.MetaData == nil {
				continue
			}
			st, err := a.MetaData.Schema()
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if got := st.SchemaString(); got != a.MetaData.SchemaString {
				t.Errorf("%s:\n got %s\nwant %s", f, got, a.MetaData.SchemaString)
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d schemas checked", n)
	}
	nested := `{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"decimal(10,2)","nullable":true,"metadata":{"comment":"<&>"}}]},"containsNull":true},"nullable":true,"metadata":{}},{"name":"m","type":{"type":"map","keyType":"string","valueType":"timestamp_ntz","valueContainsNull":false},"nullable":false,"metadata":{}}]}`
	st, err := ParseSchema(nested)
	if err != nil || st.SchemaString() != nested {
		t.Fatalf("nested round trip: %v\n%s", err, st.SchemaString())
	}
	for _, bad := range []string{`{"type":"struct","fields":[{"name":"a","type":"varchar"}]}`, `"string"`, `{`, `{"type":"array"}`} {
		if _, err := ParseSchema(bad); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("ParseSchema(%s) = %v, want ErrInvalidSchema", bad, err)
		}
	}
}

func TestMergeSchema(t *testing.T) {
	base := testSchema()
	added := &StructType{Fields: append(append([]StructField{}, base.Fields...), StructField{Name: "extra", Type: Integer, Nullable: true})}
	merged, changed, err := MergeSchema(base, added)
	if err != nil || !changed || merged.Index("extra") != 3 {
		t.Fatalf("add nullable: %v %v %v", merged, changed, err)
	}
	if _, changed, err := MergeSchema(base, base); err != nil || changed {
		t.Fatalf("same schema: changed=%v err=%v", changed, err)
	}
	retyped := &StructType{Fields: []StructField{{Name: "id", Type: Long}, {Name: "part", Type: String, Nullable: true}, {Name: "value", Type: String, Nullable: true}}}
	var sce *SchemaChangeError
	if _, _, err := MergeSchema(base, retyped); !errors.As(err, &sce) || sce.Column != "value" || sce.OldType != "double" || sce.NewType != "string" {
		t.Fatalf("retype: %v", err)
	}
	required := &StructType{Fields: append(append([]StructField{}, base.Fields...), StructField{Name: "must", Type: Integer})}
	if _, _, err := MergeSchema(base, required); !errors.As(err, &sce) || sce.Column != "must" {
		t.Fatalf("new required column: %v", err)
	}
	dropped := &StructType{Fields: base.Fields[1:]}
	if _, _, err := MergeSchema(base, dropped); !errors.As(err, &sce) || sce.Column != "id" {
		t.Fatalf("dropped required column: %v", err)
	}
}
