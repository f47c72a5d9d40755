package takeover

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// readmeMigration runs the shell lines of the README's "Migrating from the
// Spark job" recipe, as written, on a copy of a stopped Spark job's table
// and checkpoint uploaded to MinIO where the seed stack keeps them, with
// configs/seed.yaml. The compose stack is the one thing the test stands in
// for: `seed run --rm deltaflow ARGS` runs the binary with ARGS in the
// environment docker-compose.seed.yml and the Dockerfile give it, and the
// stack's host names (minio:9000, kafka:9092, nats:4222) and bucket name
// the test servers. Two settings are the test's own: the takeover's quiet
// period (Spark is known to be stopped; its files were uploaded just now)
// and the flush interval (1 s, not the job's 60 s trigger). wantRows is the
// topic's record count: the table must end with each record once. Then the
// rollback recipe (the section's second sh block) runs, its version the
// TAKEOVER commit's, and the table must hold Spark's rows again.
func readmeMigration(t *testing.T, r *rig, table, checkpoint string, wantRows int64) {
	s3 := testenv.MinIO(t)
	store, err := storage.NewS3(s3)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.deltaflow("inspect", "snapshot", "--table", table, "--json")
	if err != nil {
		t.Fatalf("inspect Spark's table: %v\n%s", err, out)
	}
	var spark struct{ NumRecords int64 }
	if err := json.Unmarshal([]byte(out), &spark); err != nil {
		t.Fatal(err)
	}
	sparkRows := spark.NumRecords
	upload(t, store, table, "delta/sensor_events")
	upload(t, store, checkpoint, "checkpoints/sensor_stream")

	root := scenario.RepoRoot(t)
	seed, err := os.ReadFile(filepath.Join(root, "configs", "seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(t))
	stack := strings.NewReplacer("s3a://sensor-data/", "s3a://"+s3.Bucket+"/", "minio:9000", s3.Endpoint,
		"kafka:9092", strings.Join(r.brokers, ","), "nats://nats:4222", r.nats)
	cfgText := stack.Replace(string(seed))
	cfgText = strings.NewReplacer("topic: sensor-events", "topic: "+r.topic, "0.0.0.0:8080", httpAddr,
		"interval: 60s", "interval: 1s").Replace(cfgText)
	cfg := filepath.Join(t.TempDir(), "deltaflow.yaml")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	stack = strings.NewReplacer("s3a://sensor-data/", "s3a://"+s3.Bucket+"/", "kafka:9092", strings.Join(r.brokers, ","),
		"nats://nats:4222", r.nats, "/etc/deltaflow/deltaflow.yaml", cfg)
	// docker-compose.seed.yml's environment, and the Dockerfile's.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"MINIO_ACCESS_KEY=" + s3.AccessKey, "MINIO_SECRET_KEY=" + string(s3.SecretKey), "NATS_URL=" + r.nats, "NATS_PASSWORD=seed-nats",
		"DELTAFLOW_CONFIG=" + cfg}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := migrationBlocks(t, string(readme))
	if len(blocks) < 2 {
		t.Fatalf("the README's migration section has %d sh blocks, want the migration and the rollback", len(blocks))
	}
	var daemon *scenario.Daemon
	ran := 0
	for _, line := range blocks[0] {
		words := strings.Fields(stack.Replace(line))
		switch {
		case words[0] == "export" || words[0] == "alias":
		case line == "docker stop spark-streaming":
			// Stopped: its stop file ended the job before the copies.
		case line == "seed --profile nats up -d nats":
			// The test's NATS runs.
		case line == "seed up -d deltaflow":
			daemon = scenario.Start(t, "deltaflow", r.bin, env, "run") // the image's CMD
		case len(words) > 4 && strings.Join(words[:4], " ") == "seed run --rm deltaflow":
			args := words[4:]
			if args[0] == "takeover" {
				args = append(args, quiet)
			}
			out, err := r.deltaflowIn(env, args...)
			if err != nil {
				t.Fatalf("README migration: %s\n%v\n%s", line, err, out)
			}
			t.Logf("%s\n%s", line, out)
			if strings.Contains(out, "note:") {
				t.Errorf("README migration: %s: something was not found\n%s", line, out)
			}
			ran++
		default:
			t.Fatalf("README migration step %q: this test does not know how to run it; teach it", line)
		}
	}
	if ran < 3 || daemon == nil {
		t.Fatalf("ran %d deltaflow commands of the README's migration, started deltaflow: %v", ran, daemon != nil)
	}
	tableURI := "s3a://" + s3.Bucket + "/delta/sensor_events"
	rows := func() int64 {
		out, err := r.deltaflowIn(env, "inspect", "snapshot", "--table", tableURI, "--json")
		if err != nil {
			t.Fatalf("inspect snapshot: %v\n%s", err, out)
		}
		var s struct{ NumRecords int64 }
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		return s.NumRecords
	}
	if err := scenario.WaitFor(2*time.Minute, func() bool { return rows() >= wantRows }); err != nil {
		t.Errorf("the table holds %d rows 2 minutes after the migration, want %d\n%s", rows(), wantRows, daemon.Tail(4000))
	}
	if err := daemon.Stop(30 * time.Second); err != nil {
		t.Fatalf("deltaflow run: %v\n%s", err, daemon.Tail(4000))
	}
	if got := rows(); got != wantRows {
		t.Errorf("after the migration the table holds %d rows, want each of the topic's %d records once", got, wantRows)
	}

	// Rolling back: deltaflow is stopped (above); the placeholder version is
	// the TAKEOVER commit's.
	out, err = r.deltaflowIn(env, "inspect", "history", "--table", tableURI, "--json")
	if err != nil {
		t.Fatalf("inspect history: %v\n%s", err, out)
	}
	var history []struct {
		Version   int64
		Operation string
	}
	if err := json.Unmarshal([]byte(out), &history); err != nil {
		t.Fatal(err)
	}
	takeover := int64(-1)
	for _, h := range history {
		if h.Operation == "TAKEOVER" {
			takeover = h.Version
		}
	}
	if takeover < 0 {
		t.Fatalf("no TAKEOVER commit in the history:\n%s", out)
	}
	restored := false
	for _, line := range blocks[1] {
		words := strings.Fields(stack.Replace(line))
		switch {
		case line == "docker start spark-streaming":
			// Spark's restart is TestTakeoverFromSpark's other cases' part.
		case len(words) > 4 && strings.Join(words[:4], " ") == "seed run --rm deltaflow":
			args := words[4:]
			for i, a := range args {
				if a == "--version" && i+1 < len(args) {
					args[i+1] = fmt.Sprint(takeover)
				}
			}
			out, err := r.deltaflowIn(env, args...)
			if err != nil {
				t.Fatalf("README rollback: %s\n%v\n%s", line, err, out)
			}
			t.Logf("%s\n%s", line, out)
			restored = restored || args[0] == "restore" && !slices.Contains(args, "--dry-run")
		default:
			t.Fatalf("README rollback step %q: this test does not know how to run it; teach it", line)
		}
	}
	if got := rows(); !restored || got != sparkRows {
		t.Errorf("after the rollback (restored: %v) the table holds %d rows, want Spark's %d", restored, got, sparkRows)
	}
}

// migrationBlocks returns the shell lines of each sh block of the README's
// migration section, continuation lines joined, comments and blank lines
// left out.
func migrationBlocks(t *testing.T, readme string) [][]string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Migrating from the Spark job\n")
	if !ok {
		t.Fatal(`README has no "## Migrating from the Spark job" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks [][]string
	for {
		_, rest, ok := strings.Cut(section, "\n```sh\n")
		if !ok {
			return blocks
		}
		block, after, _ := strings.Cut(rest, "\n```")
		section = after
		var lines []string
		for line := range strings.Lines(strings.ReplaceAll(block, "\\\n", " ")) {
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.Join(strings.Fields(line), " "); line != "" && !strings.HasPrefix(line, "#") {
				lines = append(lines, line)
			}
		}
		blocks = append(blocks, lines)
	}
}

// upload copies a local table or checkpoint to prefix in store, as s3a
// keeps them (without Hadoop's .crc checksum files).
func upload(t *testing.T, store storage.Store, dir, prefix string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(d.Name(), ".crc") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		return store.Put(t.Context(), prefix+"/"+filepath.ToSlash(rel), data)
	})
	if err != nil {
		t.Fatalf("upload %s: %v", dir, err)
	}
}
