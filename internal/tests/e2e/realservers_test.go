// Package e2e runs the deltaflow binary end to end against real servers —
// Apache Kafka (KRaft), MinIO and an external nats-server, started by
// scripts/servers.sh — and checks the result with clients deltaflow did not
// write: kcat, the nats CLI and delta-rs.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/internal/sim"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

const (
	tableName  = "sensor_events" // configs/deltaflow.yaml's table.name
	partitions = 3
	// Records written by each producer.
	produceCount = 3000
	kcatCount    = 2000
	badCount     = 4 // not-JSON records among kcat's
)

// run runs a command to completion with a timeout and returns its stdout;
// a failure is fatal and shows stderr.
func run(t *testing.T, env []string, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// rowKey identifies a sensor record: (device_id, ingested_at) is unique per
// simulator run, and the table renders event_time as delta-rs does in
// scripts/deltars.py.
func rowKey(deviceID string, ts time.Time) string {
	return deviceID + "@" + ts.UTC().Format("2006-01-02T15:04:05.000000")
}

// TestRealServers streams a 3-partition topic written by two different
// producers (deltaflow produce and kcat) into a Delta table on MinIO with the
// shipped configs/deltaflow.yaml, NATS on an external nats-server, then checks
// the table with delta-rs, the offsets with `nats kv get`, the events with
// `nats sub`, and runs OPTIMIZE and VACUUM when the binary has them.
func TestRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	brokers := testenv.Kafka(t)
	natsURL := testenv.NATS(t)
	s3 := testenv.MinIO(t)
	testenv.Python(t) // the oracle, before the run
	natsCLI := testenv.Tool(t, "nats")
	kcat := testenv.Tool(t, "kcat")
	bin := scenario.Binary(t)
	root := scenario.RepoRoot(t)

	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36) // reruns never share a topic or group
	topic := "sensor-events-" + suffix
	group := "deltaflow-e2e-" + suffix
	tableURI := "s3://" + s3.Bucket + "/sensor_events"
	// Only the variables deltaflow documents, on top of a minimal base: no
	// stray MINIO_*/KAFKA_* from the developer's shell.
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"KAFKA_BOOTSTRAP=" + strings.Join(brokers, ","),
		"KAFKA_TOPIC=" + topic,
		"KAFKA_GROUP=" + group,
		"MINIO_ENDPOINT=" + s3.Endpoint,
		"MINIO_ACCESS_KEY=" + s3.AccessKey,
		"MINIO_SECRET_KEY=" + string(s3.SecretKey),
		"NATS_URL=" + natsURL,
		"NATS_PASSWORD=" + "e2e-password", // as compose gives it (.env); the test server has no users
		"DELTAFLOW_TABLE_URI=" + tableURI,
		"DELTAFLOW_HTTP_LISTEN=127.0.0.1:0",
		"FLUSH_INTERVAL=1s",
	}
	pyEnv := append(os.Environ(),
		testenv.EnvMinIOEndpoint+"="+s3.Endpoint,
		testenv.EnvMinIOAccessKey+"="+s3.AccessKey,
		testenv.EnvMinIOSecretKey+"="+string(s3.SecretKey))

	// 1. Topic with 3 partitions and the first records, by deltaflow produce.
	simStart := time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC)
	out := run(t, env, 2*time.Minute, bin, "produce", "--topic", topic, "--partitions", strconv.Itoa(partitions),
		"--count", strconv.Itoa(produceCount), "--seed", "1", "--start", simStart.Format(time.RFC3339))
	t.Logf("deltaflow produce: %s", bytes.TrimSpace(out))
	want := map[string]bool{}
	// The same simulator settings produce uses, to know which keys it sent.
	ps := sim.New(sim.Config{Devices: 50, Seed: 1, Events: produceCount, Start: simStart})
	for range produceCount {
		_, _, ev := ps.Next(nil)
		want[rowKey(ev.DeviceID, ev.IngestedAt)] = true
	}

	// 2. Watch every deltaflow subject with the nats CLI before the run.
	var subOut testenv.SyncBuffer
	subCtx, subCancel := context.WithCancel(context.Background())
	sub := exec.CommandContext(subCtx, natsCLI, "--server", natsURL, "sub", "deltaflow.>")
	sub.Stdout, sub.Stderr = &subOut, &subOut
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { subCancel(); _ = sub.Wait() }()
	waitFor(t, 15*time.Second, "nats sub to subscribe", func() bool {
		return strings.Contains(subOut.String(), "Subscribing on")
	}, subOut.String)

	// 3. The daemon with the shipped config, pointed here by the environment.
	var runErr testenv.SyncBuffer
	daemon := exec.Command(bin, "run", "--config", filepath.Join(root, "configs", "deltaflow.yaml"))
	daemon.Env = env
	daemon.Stdout, daemon.Stderr = &runErr, &runErr
	started := time.Now()
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	reaped := false // set once exited was received from
	defer func() {
		if !reaped {
			_ = daemon.Process.Kill()
			<-exited
		}
	}()
	alive := func() {
		select {
		case err := <-exited:
			reaped = true
			t.Fatalf("deltaflow run exited early: %v\n%s", err, runErr.String())
		default:
		}
	}

	// The table's snapshot as `inspect snapshot` shows it, false before
	// the table is there.
	var snap struct {
		Version    int64            `json:"version"`
		NumRecords int64            `json:"numRecords"`
		Txn        map[string]int64 `json:"txn"`
	}
	snapshot := func() bool {
		alive()
		cmd := exec.Command(bin, "inspect", "snapshot", "--json", "--table", tableURI)
		cmd.Env = env
		out, err := cmd.Output()
		return err == nil && json.Unmarshal(out, &snap) == nil
	}

	// 4. Let deltaflow produce's records commit before kcat writes more, so
	// the run makes several commits. (Waiting for the first commit event
	// was not enough: it may hold some of them, and the rest commit with
	// kcat's in one file per partition value, leaving OPTIMIZE nothing.)
	waitFor(t, time.Minute, "deltaflow produce's records committed", func() bool {
		return snapshot() && snap.NumRecords == produceCount
	}, runErr.String)

	// 5. More records while the daemon runs, with kcat (librdkafka): key<TAB>value
	// lines. Compact JSON never holds a raw tab, so the delimiter is safe.
	// A late hour of the producer's first day keeps the two simulators'
	// keys apart while adding files to partitions the first epoch wrote, so
	// OPTIMIZE below has work. A few records that are not JSON go to the DLQ.
	ks := sim.New(sim.Config{Devices: 20, Seed: 2, Events: kcatCount,
		Start: time.Date(2026, 6, 22, 23, 0, 0, 0, time.UTC), Span: 30 * time.Minute})
	var lines bytes.Buffer
	for i := range kcatCount {
		key, value, ev := ks.Next(nil)
		lines.Write(key)
		lines.WriteByte('\t')
		lines.Write(value)
		lines.WriteByte('\n')
		want[rowKey(ev.DeviceID, ev.IngestedAt)] = true
		if i%(kcatCount/badCount) == 0 {
			fmt.Fprintf(&lines, "bad-%d\tnot json %s #%d\n", i, suffix, i)
		}
	}
	kctx, kcancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer kcancel()
	kc := exec.CommandContext(kctx, kcat, "-P", "-b", strings.Join(brokers, ","), "-t", topic, "-K", "\t", "-z", "snappy")
	kc.Stdin = &lines
	if out, err := kc.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	if len(want) != produceCount+kcatCount {
		t.Fatalf("simulators sent %d distinct keys, want %d", len(want), produceCount+kcatCount)
	}
	hw := endOffsets(t, brokers, topic)
	var sum int64
	for _, o := range hw {
		sum += o
	}
	if len(hw) != partitions || sum != produceCount+kcatCount+badCount {
		t.Fatalf("topic end offsets %v (sum %d), want %d partitions holding %d records", hw, sum, partitions, produceCount+kcatCount+badCount)
	}
	t.Logf("topic %s: end offsets %v", topic, hw)

	// Committed when every partition's txn version is its end offset - 1.
	caughtUp := func() bool {
		if !snapshot() {
			return false
		}
		for p, end := range hw {
			if snap.Txn[fmt.Sprintf("deltaflow-%s-%d", topic, p)] != end-1 {
				return false
			}
		}
		return true
	}
	waitFor(t, 2*time.Minute, "the table to reach the end offsets", caughtUp, runErr.String)
	t.Logf("committed everything in %s: version %d, %d records", time.Since(started).Round(time.Millisecond), snap.Version, snap.NumRecords)
	if snap.NumRecords != int64(len(want)) {
		t.Errorf("snapshot numRecords = %d, want %d", snap.NumRecords, len(want))
	}

	// The control service answers the CLI while the daemon runs.
	micro := run(t, nil, 30*time.Second, natsCLI, "--server", natsURL, "micro", "info", "deltaflow")
	if !strings.Contains(string(micro), "deltaflow") {
		t.Errorf("nats micro info deltaflow:\n%s", micro)
	}

	// The DLQ stream holds the bad records with their reason. (`nats stream
	// view` would show them too but insists on a terminal.)
	dlq := bridge.DefaultDLQStream(tableName)
	view := string(run(t, nil, 30*time.Second, natsCLI, "--server", natsURL, "sub", "--stream", dlq, "--all",
		"--count", strconv.Itoa(badCount), fmt.Sprintf("deltaflow.%s.dlq.%s.>", bridge.Token(tableName), bridge.Token(topic))))
	if n := strings.Count(view, "not json "+suffix); n != badCount || !strings.Contains(view, "Deltaflow-Error") {
		t.Errorf("DLQ stream %s shows %d of our %d bad records:\n%s", dlq, n, badCount, tail(view, 4000))
	}

	// 6. SIGTERM: a clean exit 0.
	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		reaped = true
		if err != nil {
			t.Fatalf("deltaflow run after SIGTERM: %v\n%s", err, runErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("deltaflow run still running 30s after SIGTERM\n%s", runErr.String())
	}

	// 7. delta-rs reads exactly the produced rows.
	checkRows(t, pyEnv, tableURI, want, "after run")

	// 8. The KV mirror holds the final offsets (the nats CLI reads it).
	for p, end := range hw {
		key := bridge.OffsetKey(tableName, topic, p)
		var rec bridge.OffsetRecord
		waitFor(t, 15*time.Second, "KV offset "+key, func() bool {
			cmd := exec.Command(natsCLI, "--server", natsURL, "kv", "get", bridge.DefaultKVBucket, key, "--raw")
			out, err := cmd.Output()
			return err == nil && json.Unmarshal(out, &rec) == nil && rec.Offset == end-1
		}, func() string { return fmt.Sprintf("last value %+v, want offset %d", rec, end-1) })
		t.Logf("nats kv get %s %s: %+v", bridge.DefaultKVBucket, key, rec)
	}

	// 9. nats sub saw the commit events.
	events := subOut.String()
	for _, want := range []string{"deltaflow." + tableName + ".events.commit", "io.deltaflow.v1.commit"} {
		if !strings.Contains(events, want) {
			t.Errorf("nats sub output lacks %q:\n%s", want, tail(events, 4000))
		}
	}
	t.Logf("nats sub saw %d commit events", strings.Count(events, ".events.commit"))

	// 10. OPTIMIZE then VACUUM: the same rows in fewer files, and no file
	// left in storage that the table does not use.
	before := liveFiles(t, env, bin, tableURI)
	out = run(t, env, 5*time.Minute, bin, "optimize", "--table", tableURI)
	t.Logf("deltaflow optimize: %s", bytes.TrimSpace(out))
	after := liveFiles(t, env, bin, tableURI)
	if after >= before {
		t.Errorf("optimize left %d live files (was %d)", after, before)
	}
	checkRows(t, pyEnv, tableURI, want, "after optimize")
	out = run(t, env, 5*time.Minute, bin, "vacuum", "--table", tableURI, "--retain", "0h", "--force")
	t.Logf("deltaflow vacuum: %s", bytes.TrimSpace(out))
	checkRows(t, pyEnv, tableURI, want, "after vacuum")
	out = run(t, env, time.Minute, bin, "verify", "--table", tableURI, "--deep")
	t.Logf("deltaflow verify: %s", bytes.TrimSpace(out))
}

// liveFiles counts the table's live data files with `deltaflow inspect files`.
func liveFiles(t *testing.T, env []string, bin, tableURI string) int {
	t.Helper()
	var files []json.RawMessage
	if err := json.Unmarshal(run(t, env, time.Minute, bin, "inspect", "files", "--table", tableURI, "--json"), &files); err != nil {
		t.Fatalf("inspect files: %v", err)
	}
	return len(files)
}

// checkRows reads the table with delta-rs and compares its rows with want by
// (device_id, event_time), and their count.
func checkRows(t *testing.T, env []string, uri string, want map[string]bool, when string) {
	t.Helper()
	res := scenario.DeltaRS(t, env, uri)
	got := map[string]int{}
	for _, r := range res.Rows {
		id, _ := r["device_id"].(string)
		ts, _ := r["event_time"].(string)
		got[id+"@"+ts]++
	}
	var missing, extra, dup int
	for k := range want {
		if got[k] == 0 {
			missing++
		}
	}
	for k, n := range got {
		if !want[k] {
			extra++
		}
		if n > 1 {
			dup++
		}
	}
	if len(res.Rows) != len(want) || missing+extra+dup > 0 {
		t.Fatalf("%s: delta-rs reads %d rows at version %d, want %d: %d missing, %d unexpected, %d duplicated",
			when, len(res.Rows), res.Version, len(want), missing, extra, dup)
	}
	t.Logf("%s: delta-rs reads exactly the %d produced rows (version %d)", when, len(res.Rows), res.Version)
}

// endOffsets returns the topic's end offsets by partition.
func endOffsets(t *testing.T, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	res := map[int32]int64{}
	var errs []error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
		res[o.Partition] = o.Offset
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return res
}

// waitFor polls cond every 250ms until it holds or timeout passes; then it
// fails the test with what (and detail's output).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, detail func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, tail(detail(), 8000))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
