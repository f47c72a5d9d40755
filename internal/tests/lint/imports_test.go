package lint

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/deltaflow/deltaflow"

// forbidden maps a package to the packages it must never depend on, even
// indirectly: imports point inward.
var forbidden = map[string][]string{
	"storage": {module + "/actors", module + "/bridge", module + "/runtime", module + "/delta", module + "/messages",
		"github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/nats-io/"},
	"delta": {module + "/actors", module + "/bridge", module + "/runtime", module + "/messages",
		"github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/nats-io/"},
	// Below the log: the schema and the helpers import nothing of ours but
	// each other, and the data file codec knows the schema, never the log
	// or the store.
	"delta/schema":               {module + "/storage", module + "/delta/internal/parquetfile", module + "/delta/internal/pq", module + "/delta/internal/roaring"},
	"delta/internal/parquetfile": {module + "/storage", module + "/internal", module + "/delta/internal/roaring", module + "/delta/internal/pqguard"},
	"delta/internal/pqnode":      {module + "/"},
	"delta/internal/jsonenc":     {module + "/"},
	"delta/internal/roaring":     {module + "/"},
	"delta/internal/pqguard":     {module + "/"},
	// The messages import none of ours but their dead letter's and key
	// log's packages, which import nothing.
	"messages":        {module + "/actors", module + "/bridge", module + "/runtime", module + "/delta", module + "/storage", module + "/internal"},
	"messages/letter": {module + "/", "github.com/"},
	"messages/keylog": {module + "/", "github.com/"},
	// Upserts are plain functions over delta, as the ledger is.
	"upsert": {module + "/actors", module + "/bridge", module + "/runtime", module + "/mapping",
		"github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/nats-io/"},
	"mapping": {module + "/actors", module + "/ledger", module + "/bridge", module + "/runtime", "github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/nats-io/"},
	"bridge":  {module + "/actors", module + "/runtime", module + "/delta", "github.com/asynkron/protoactor-go", "github.com/twmb/franz-go"},
	// The Kafka client speaks the ledger's vocabulary (log ranges, held
	// partitions, the start policies), so it reaches delta only through it.
	"bridge/kafka": {module + "/actors", module + "/runtime", "github.com/asynkron/protoactor-go", "github.com/nats-io/"},
	"actors":       {module + "/runtime"},
	// The exactly-once model is plain functions over delta: no actor, no
	// Kafka or NATS client (bridge/kafka imports it, never the reverse).
	"ledger": {module + "/actors", module + "/bridge", module + "/runtime", module + "/messages",
		"github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/nats-io/"},
	// Small product helpers sit below everything: they import nothing of ours.
	"internal/sim":        {module + "/"},
	"internal/secret":     {module + "/"},
	"internal/failpoint":  {module + "/"},
	"internal/bytesize":   {module + "/"},
	"internal/configview": {module + "/"},
	"internal/procstat":   {module + "/"},
	// The daemon never links the developer tools.
	"runtime/daemon": {module + "/runtime/devtools", module + "/runtime/cli"},
	"runtime/sparkcheckpoint": {module + "/actors", module + "/bridge", module + "/delta", module + "/runtime/cli",
		"github.com/asynkron/protoactor-go", "github.com/twmb/franz-go", "github.com/nats-io/"},
}

// testOnly are the packages that exist for tests: suites, servers and
// twins. Product code (what the binary links) must never depend on them.
var testOnly = []string{module + "/internal/tests/", module + "/storage/storagetest"}

// TestProductCodeImportsNoTestCode lists what cmd/deltaflow links and every
// non-test package outside internal/tests, and fails if any depends on a
// test-only package.
func TestProductCodeImportsNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for pkg := range strings.FieldsSeq(string(out)) {
		if isTestOnly(pkg) {
			continue
		}
		deps, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for dep := range strings.FieldsSeq(string(deps)) {
			if isTestOnly(dep) {
				t.Errorf("product package %s depends on test-only %s", pkg, dep)
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("checked %d product packages; the module listing is wrong", checked)
	}
}

func isTestOnly(pkg string) bool {
	for _, p := range testOnly {
		if strings.HasPrefix(pkg, p) {
			return true
		}
	}
	return false
}

func TestForbiddenImports(t *testing.T) {
	for pkg, bans := range forbidden {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for dep := range strings.FieldsSeq(string(out)) {
			if dep == module+"/"+pkg {
				continue
			}
			for _, ban := range bans {
				if strings.HasPrefix(dep, ban) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

// directBans are imports a package must not make itself (its dependencies
// may): the CLI reaches the engine only through runtime/daemon, never
// protoactor's package and its init.
var directBans = map[string][]string{
	"runtime/cli": {module + "/actors", "github.com/asynkron/protoactor-go"},
}

func TestDirectImports(t *testing.T) {
	for pkg, bans := range directBans {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, module+"/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for imp := range strings.FieldsSeq(string(out)) {
			for _, ban := range bans {
				if imp == ban || strings.HasPrefix(imp, ban+"/") {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
}
