package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// orderProto is the mapping tests' .proto file, which imports money.proto
// beside it.
var orderProto, _ = filepath.Abs(filepath.Join("..", "..", "mapping", "testdata", "protofile", "order.proto"))

// protoRoutes writes a configuration of two routes, the second a protobuf
// one whose keys are route (indented), with a schema registry configured.
func protoRoutes(t *testing.T, route string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "schema_registry:\n  url: http://127.0.0.1:1\ntables:\n  - name: a\n    uri: data/a\n    topics: [a]\n" +
		"  - name: b\n    uri: data/b\n    topics: [b]\n    format: protobuf\n" + route
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A protobuf route with a schema file and message reads no registry, even
// with one configured: the configuration compiles its mapper, whose
// columns are the message's fields.
func TestProtoFileRoute(t *testing.T) {
	cfg, err := Load(protoRoutes(t, "    schema_file: "+orderProto+"\n    message: shop.Event\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Tables[1]
	if b.readsRegistry() {
		t.Error("a protobuf route with a schema file reads the registry")
	}
	m, err := cfg.checkedMapper(b.TableConfig, "tables[1]")
	if err != nil || m == nil {
		t.Fatalf("mapper of tables[1]: %v, %v; want one compiled now", m, err)
	}
	var names []string
	for _, f := range m.Schema().Fields {
		names = append(names, f.Name)
	}
	if want := []string{"id", "status", "at", "currency", "amount", "text"}; !slices.Equal(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
}

// Config errors of a protobuf route's schema file name the key and the
// file (and a syntax error's line), as config check shows them.
func TestProtoFileRouteErrors(t *testing.T) {
	dir := t.TempDir()
	syntax := filepath.Join(dir, "syntax.proto")
	noImport := filepath.Join(dir, "imports.proto")
	for path, text := range map[string]string{syntax: "syntax = \"proto3\";\nmessage M {\n  int32 a = ;\n}\n",
		noImport: "syntax = \"proto3\";\nimport \"gone.proto\";\nmessage M { Gone g = 1; }\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "nope.proto")
	for _, c := range []struct{ name, route, want string }{
		{"a missing file", "    schema_file: " + missing + "\n    message: M\n", "tables[1].schema_file (line 11): " + missing + ": open " + missing},
		{"a syntax error", "    schema_file: " + syntax + "\n    message: M\n", "tables[1].schema_file (line 11): " + syntax + ": syntax.proto:3:13: syntax error"},
		{"an import not found", "    schema_file: " + noImport + "\n    message: M\n", "tables[1].schema_file (line 11): " + noImport + ": imports.proto:2:8: open " + filepath.Join(dir, "gone.proto")},
		{"an unknown message", "    schema_file: " + orderProto + "\n    message: shop.Nope\n",
			"tables[1].message (line 12): " + orderProto + ": the schema order.proto has no message shop.Nope"},
		{"no message", "    schema_file: " + orderProto + "\n", "tables[1].message: the records of a protobuf schema_file carry no message indexes"},
		{"a subject", "    schema_file: " + orderProto + "\n    message: shop.Event\n    subject: b-value\n",
			"tables[1].subject (line 13): only a format: avro or protobuf table without schema_file"},
	} {
		_, err := Load(protoRoutes(t, c.route), noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant an error saying %q", c.name, err, c.want)
		}
	}
}
