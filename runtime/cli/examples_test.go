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
)

// TestHelpExamplesRun: every example in every command's --help runs (exit
// 0) against a table deltaflow made from a topic of the simulator's
// records, as after `deltaflow demo`; and every table command but takeover
// (which needs a Spark checkpoint) shows one.
func TestHelpExamplesRun(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "sensor-events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	broker := cluster.ListenAddrs()[0]
	if code, _, errs := run(t, "produce", "--brokers", broker, "--count", "300"); code != 0 {
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
			for i, a := range args {
				args[i] = strings.NewReplacer(exampleTable, table, exampleBroker, broker, exampleConfig, cfg).Replace(a)
			}
			examples++
			if code, out, errs := run(t, args[1:]...); code != 0 {
				t.Errorf("%s: exit %d\n%s%s", strings.TrimSpace(line), code, out, errs)
			}
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
