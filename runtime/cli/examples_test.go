package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Names the examples use for the table and the broker, as `deltaflow demo`
// sets them up.
const (
	exampleTable  = "./data/sensor_events"
	exampleBroker = "127.0.0.1:9092"
	exampleConfig = "./deltaflow.yaml" // the demo table's, with the test's broker and NATS
	// localConfig is the README's workstation configuration; examples run
	// with the demo table's in its place (its broker and NATS are the test's).
	localConfig = "configs/local.yaml"
)

// TestHelpExamplesRun: every example in every command's --help runs (exit
// 0) against a table deltaflow made from a topic of the simulator's
// records, as after `deltaflow demo`; and every table command but takeover
// (which needs a Spark checkpoint) shows one.
func TestHelpExamplesRun(t *testing.T) {
	ex := newExampleSetup(t)
	root, _ := newRoot(IO{Stdout: os.Stdout, Stderr: os.Stderr})
	examples := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.GroupID == groupTable && c.Name() != "takeover" && c.Example == "" {
			t.Errorf("%s --help shows no example", c.CommandPath())
		}
		for line := range strings.Lines(c.Example) {
			args := shellWords(t, strings.TrimSpace(line))
			if len(args) == 0 || args[0] != "deltaflow" {
				t.Errorf("%s: example %q does not start with deltaflow", c.CommandPath(), line)
				continue
			}
			examples++
			ex.run(t, line, args[1:])
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if examples < 10 {
		t.Fatalf("only %d examples ran", examples)
	}
}

// exampleSetup is a table deltaflow made from a topic of the simulator's
// records (some malformed, so the DLQ holds letters), as after `deltaflow
// demo`, and the configuration that made it.
type exampleSetup struct {
	table, cfg, broker string
}

func newExampleSetup(t *testing.T) *exampleSetup {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "sensor-events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	broker := cluster.ListenAddrs()[0]
	if code, _, errs := run(t, "produce", "--brokers", broker, "--count", "300", "--bad-ratio", "0.05"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	dir := t.TempDir()
	table := filepath.Join(dir, "sensor_events")
	cfg := filepath.Join(dir, "deltaflow.yaml")
	yaml := "table: {uri: " + table + "}\nkafka: {brokers: [" + broker + "]}\n" +
		"nats: {listen: " + freeAddr(t) + ", store_dir: " + filepath.Join(dir, "nats") + "}\n" +
		"http: {listen: ''}\nflush: {interval: 1s}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, "run", "--config", cfg, "--until-latest"); code != 0 {
		t.Fatalf("run --until-latest: exit %d: %s", code, errs)
	}
	return &exampleSetup{table: table, cfg: cfg, broker: broker}
}

// run runs an example's arguments with the example names replaced by the
// table's, failing t unless it exits 0.
func (ex *exampleSetup) run(t *testing.T, line string, args []string) {
	t.Helper()
	for i, a := range args {
		args[i] = strings.NewReplacer(exampleTable, ex.table, exampleBroker, ex.broker, exampleConfig, ex.cfg,
			localConfig, ex.cfg).Replace(a)
	}
	if code, out, errs := run(t, args...); code != 0 {
		t.Errorf("%s: exit %d\n%s%s", strings.TrimSpace(line), code, out, errs)
	}
}

// readmeSkipped are the README's deltaflow commands this test does not run,
// and where they run instead.
var readmeSkipped = map[string]string{
	"./deltaflow demo --duration 30s":                     "TestDemo (e2e_test.go) runs the demo",
	"./deltaflow demo --duration 2m --data ./data-live &": "TestREADMEMonitoringRecipe (e2e_test.go) runs it",
}

// TestREADMEExamplesRun: every deltaflow command in the README's shell
// blocks runs (exit 0) against a table as after the demo, but those
// readmeSkipped names; commands of the compose stack (`seed run --rm
// deltaflow …`) run in internal/tests/takeover.
func TestREADMEExamplesRun(t *testing.T) {
	ex := newExampleSetup(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, line := range shellLines(string(readme)) {
		args := shellWords(t, line)
		if len(args) == 0 || args[0] != "deltaflow" && args[0] != "./deltaflow" {
			continue
		}
		if _, ok := readmeSkipped[line]; ok {
			continue
		}
		ran++
		ex.run(t, line, args[1:])
	}
	if ran < 8 {
		t.Fatalf("only %d README commands ran", ran)
	}
}

// shellLines returns the lines of the Markdown's sh blocks, continuation
// lines joined and comments cut.
func shellLines(md string) []string {
	var lines []string
	inBlock := false
	for line := range strings.Lines(strings.ReplaceAll(md, "\\\n", " ")) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "```sh":
			inBlock = true
		case line == "```":
			inBlock = false
		case inBlock:
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// freeAddr returns a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// shellWords splits an example line as a shell would: words separated by
// spaces, "double quoted" words kept whole.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
