package takeover

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/storage"
)

const quiet = "--quiet-for=1ms" // Spark is known to be stopped

// TestTakeoverFromSpark is the migration on one Spark run: the real job
// drains a backlog; takeover refuses while it runs; it is stopped cleanly;
// more records arrive; takeover (dry run, then for real) and run ingest
// exactly the rest. On copies of Spark's state: commits/N deleted (a crash
// after batch N reached the table) resumes after batch N, and retention
// that ate part of the gap is refused with the lost count. Spark then
// reads the table deltaflow appended to, and the seed's optimize.py runs
// while deltaflow appends. The README's migration recipe runs as written on
// another copy.
func TestTakeoverFromSpark(t *testing.T) {
	r := newRig(t, "takeover")
	work := t.TempDir()
	table, ck, stop := filepath.Join(work, "table"), filepath.Join(work, "ckpt"), filepath.Join(work, "stop")
	r.produce(1500, 1)
	sp := r.startSpark(table, ck, "--stop-file", stop)
	sp.waitFile(t, filepath.Join(ck, "commits", "0"), 5*time.Minute)

	out, err := r.takeover(table, ck)
	if err == nil || !strings.Contains(out, "looks alive") || !strings.Contains(out, "stop the Spark job") {
		t.Fatalf("takeover while Spark runs: want a refusal naming it alive, got %v:\n%s", err, out)
	}
	checkSparkSchema(t, table)

	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sp.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("spark: %v\n%s", err, sp.d.Tail(6000))
	}
	n := lastID(t, filepath.Join(ck, "commits"))
	sparkNext := sparkOffsets(t, ck, n)
	qid := queryID(t, ck)
	if got, spark := r.txns(table, qid); len(got) != 0 || spark != n {
		t.Fatalf("after the refused takeover: deltaflow txns %v (want none), Spark txn %d (want %d)", got, spark, n)
	}
	// Pristine copies of Spark's state for the sub-cases.
	tableDel, ckDel := filepath.Join(work, "table-del"), filepath.Join(work, "ckpt-del")
	tableRet, ckRet := filepath.Join(work, "table-ret"), filepath.Join(work, "ckpt-ret")
	copyDir(t, table, tableDel)
	copyDir(t, ck, ckDel)
	copyDir(t, table, tableRet)
	copyDir(t, ck, ckRet)
	tableReadme, ckReadme := filepath.Join(work, "table-readme"), filepath.Join(work, "ckpt-readme")
	copyDir(t, table, tableReadme)
	copyDir(t, ck, ckReadme)
	for _, f := range []string{strconv.FormatInt(n, 10), "." + strconv.FormatInt(n, 10) + ".crc"} {
		if err := os.Remove(filepath.Join(ckDel, "commits", f)); err != nil {
			t.Fatal(err)
		}
	}

	r.produce(1000, 2) // arrives while nobody reads

	out, err = r.takeover(table, ck, "--dry-run", quiet)
	if err != nil || !strings.Contains(out, "dry run: nothing written") {
		t.Fatalf("takeover --dry-run: %v\n%s", err, out)
	}
	if got, _ := r.txns(table, qid); len(got) != 0 {
		t.Fatalf("dry run wrote txns %v", got)
	}
	t.Logf("takeover --dry-run:\n%s", out)
	out, err = r.takeover(table, ck, quiet)
	if err != nil {
		t.Fatalf("takeover: %v\n%s", err, out)
	}
	wantTxns := map[int32]int64{}
	for p, o := range sparkNext {
		wantTxns[p] = o - 1
	}
	if got, _ := r.txns(table, qid); !maps.Equal(got, wantTxns) {
		t.Fatalf("takeover wrote txns %v, want Spark's next offsets - 1 %v\n%s", got, wantTxns, out)
	}
	if out, err := r.takeover(table, ck, quiet); err == nil || !strings.Contains(out, "already holds deltaflow offsets") || !strings.Contains(out, "--force") {
		t.Fatalf("second takeover: want a refusal naming deltaflow's offsets and --force, got %v:\n%s", err, out)
	}
	r.run(table, nil)
	if rep := r.check(table); rep.Rows != 2500 {
		t.Fatalf("rows %d, want 2500", rep.Rows)
	}
	if rs := scenario.DeltaRS(t, nil, table); len(rs.Rows) != 2500 {
		t.Fatalf("delta-rs reads %d rows of the table Spark created and deltaflow appended to, want 2500", len(rs.Rows))
	}

	t.Run("commits of the last batch missing, batch in the table", func(t *testing.T) {
		r := r.with(t)
		out, err := r.takeover(tableDel, ckDel, quiet)
		if err != nil || !strings.Contains(out, fmt.Sprintf("batch %d reached the table", n)) {
			t.Fatalf("takeover: %v\n%s", err, out)
		}
		if got, _ := r.txns(tableDel, qid); !maps.Equal(got, wantTxns) {
			t.Fatalf("txns %v, want %v", got, wantTxns)
		}
		r.run(tableDel, nil)
		r.check(tableDel)
	})

	t.Run("checkpoint on S3 as s3a://", func(t *testing.T) {
		r := r.with(t)
		s3 := testenv.MinIO(t)
		store, err := storage.NewS3(s3)
		if err != nil {
			t.Fatal(err)
		}
		upload(t, store, ckRet, "checkpoints/sensor_stream")
		t.Setenv("MINIO_ENDPOINT", s3.Endpoint)
		t.Setenv("MINIO_ACCESS_KEY", s3.AccessKey)
		t.Setenv("MINIO_SECRET_KEY", string(s3.SecretKey))
		out, err := r.takeover(tableRet, "s3a://"+s3.Bucket+"/checkpoints/sensor_stream", "--dry-run", quiet)
		if err != nil || !strings.Contains(out, fmt.Sprintf("last batch in the table: %d (commits/%d exists)", n, n)) {
			t.Fatalf("takeover from s3a://: %v\n%s", err, out)
		}
		for p, o := range sparkNext {
			if !strings.Contains(out, fmt.Sprintf("\n%d  ", p)) || !strings.Contains(out, strconv.FormatInt(o, 10)) {
				t.Errorf("plan lacks partition %d at %d:\n%s", p, o, out)
			}
		}
	})

	t.Run("the README's migration commands, as written", func(t *testing.T) {
		readmeMigration(t, r.with(t), tableReadme, ckReadme, 2500)
	})

	t.Run("Spark reads it; optimize.py while deltaflow appends", func(t *testing.T) {
		r := r.with(t)
		d := r.startRun(table, nil)
		prod := scenario.Start(t, "produce", r.bin, os.Environ(), "produce", "--brokers", strings.Join(r.brokers, ","),
			"--topic", r.topic, "--rate", "300", "--count", "0", "--seed", "3")
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		opt := exec.CommandContext(ctx, r.py, filepath.Join(r.dir, "optimize.py"), "--table", table, "--report")
		opt.Env = os.Environ()
		optOut, err := opt.CombinedOutput()
		t.Logf("optimize.py ran %s (a JVM): %s", time.Since(start).Round(100*time.Millisecond), eventLine(optOut, "done"))
		if err != nil {
			t.Fatalf("optimize.py: %v\n%s", err, tail(optOut))
		}
		if err := prod.Stop(10 * time.Second); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if err := d.Stop(30 * time.Second); err != nil {
			t.Fatalf("deltaflow run: %v\n%s", err, d.Tail(4000))
		}
		rep := readReport(t, optOut)
		want := rowsAt(t, table, rep.Version)
		if rep.Rows != want || rep.Distinct != want || want < 2500 {
			t.Fatalf("Spark read version %d: %d rows, %d distinct coordinates; deltaflow's reader: %d", rep.Version, rep.Rows, rep.Distinct, want)
		}
		t.Logf("Spark read version %d: %d rows", rep.Version, rep.Rows)
		if !historyHas(t, table, "OPTIMIZE") {
			t.Errorf("no OPTIMIZE commit in the table's history\n%s", tail(optOut))
		}
		r.run(table, nil) // what deltaflow read after its stop
		r.check(table)
	})

	t.Run("retention ate part of the gap", func(t *testing.T) {
		r := r.with(t)
		const lost = 7
		r.deleteRecords(0, sparkNext[0]+lost)
		out, err := r.takeover(tableRet, ckRet, quiet)
		if err == nil || !strings.Contains(out, fmt.Sprintf("refusing: %d records", lost)) || !strings.Contains(out, "retention") {
			t.Fatalf("want a refusal counting %d lost records, got %v:\n%s", lost, err, out)
		}
		if got, _ := r.txns(tableRet, qid); len(got) != 0 {
			t.Fatalf("refused takeover wrote txns %v", got)
		}
	})
}

// checkSparkSchema compares the table the real Spark job created with the
// schema deltaflow's default mapping (plus the test's Kafka coordinate
// columns) declares: names, order, types and nullability.
func checkSparkSchema(t *testing.T, table string) {
	t.Helper()
	store, err := storage.NewLocal(table)
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	spark, err := s.Schema()
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapping.New(mapping.Config{Columns: scenario.Columns()}, mapping.DefaultPartitionColumns)
	if err != nil {
		t.Fatal(err)
	}
	render := func(st *delta.StructType) []string {
		var out []string
		for _, f := range st.Fields {
			out = append(out, fmt.Sprintf("%s %s nullable=%t", f.Name, f.Type, f.Nullable))
		}
		return out
	}
	if got, want := render(m.Schema()), render(spark); !slices.Equal(got, want) {
		t.Errorf("deltaflow's default columns differ from the Spark job's table:\ndeltaflow: %v\nspark:     %v", got, want)
	}
	if got := s.PartitionColumns(); !slices.Equal(got, mapping.DefaultPartitionColumns) {
		t.Errorf("Spark partitions by %v, deltaflow by %v", got, mapping.DefaultPartitionColumns)
	}
}

// lastID is the highest batch id among a checkpoint directory's files
// (offsets/ or commits/); it fails the test when there is none.
func lastID(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(-1)
	for _, e := range ents {
		if v, err := strconv.ParseInt(e.Name(), 10, 64); err == nil {
			n = max(n, v)
		}
	}
	if n < 0 {
		t.Fatalf("no batch files in %s", dir)
	}
	return n
}

// sparkReport is optimize.py --report's line.
type sparkReport struct {
	Version  int64 `json:"version"`
	Rows     int   `json:"rows"`
	Distinct int   `json:"distinct"`
}

func readReport(t *testing.T, out []byte) sparkReport {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rep struct {
			sparkReport
			Event string `json:"event"`
		}
		if json.Unmarshal(sc.Bytes(), &rep) == nil && rep.Event == "read" {
			return rep.sparkReport
		}
	}
	t.Fatalf("optimize.py printed no read report\n%s", tail(out))
	return sparkReport{}
}

// rowsAt counts the rows of the table at version v with deltaflow's reader
// (the files' logged record counts).
func rowsAt(t *testing.T, table string, v int64) int {
	t.Helper()
	store, err := storage.NewLocal(table)
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewTable(store).SnapshotAt(t.Context(), v)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, a := range s.Files() {
		st, err := delta.ParseStats(a.Stats)
		if err != nil || st == nil {
			t.Fatalf("stats of %s: %v", a.Path, err)
		}
		n += int(st.NumRecords)
	}
	return n
}

// historyHas reports whether a commit of the table has the operation.
func historyHas(t *testing.T, table, op string) bool {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(table, "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(table, "_delta_log", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), `"operation":"`+op+`"`) {
			return true
		}
	}
	return false
}

// eventLine returns the output's JSON line of the event, or "".
func eventLine(out []byte, event string) string {
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "{") && strings.Contains(line, `"event": "`+event+`"`) {
			return line
		}
	}
	return ""
}

func tail(b []byte) string {
	if len(b) > 6000 {
		return "…" + string(b[len(b)-6000:])
	}
	return string(b)
}
