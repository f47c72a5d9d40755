package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/runtime/dlqreplay"
)

// dlqConfig writes a configuration of the default columns in which the
// door sensors' contact is required when contactRequired (so every smart
// plug record goes to the DLQ) and not otherwise: a mapping and its fix.
func dlqConfig(t *testing.T, dir, table, broker, natsListen string, contactRequired bool) string {
	t.Helper()
	cols := []string{
		"{name: device_id, type: string, source: device_id, required: true}",
		"{name: device_type, type: string, source: device_type, required: true}",
		"{name: event_time, type: timestamp, source: ingested_at, required: true}",
		"{name: linkquality, type: integer, source: payload.linkquality}",
		"{name: contact, type: boolean, source: payload.contact, required: " + map[bool]string{true: "true", false: "false"}[contactRequired] + "}",
		"{name: battery, type: integer, source: payload.battery}",
		"{name: power, type: double, source: payload.power}",
		"{name: voltage, type: double, source: payload.voltage}",
		"{name: current, type: double, source: payload.current}",
		"{name: energy, type: double, source: payload.energy}",
		"{name: plug_state, type: string, source: payload.state}",
		"{name: raw_payload, type: string, source: payload}",
		"{name: processed_at, type: timestamp, source: now()}",
		"{name: event_date, type: date, source: date(event_time)}",
	}
	yaml := "table:\n  uri: " + table + "\n  columns:\n    - " + strings.Join(cols, "\n    - ") + "\n" +
		"kafka: {brokers: [" + broker + "]}\n" +
		"nats: {listen: " + natsListen + ", store_dir: " + filepath.Join(dir, "nats") + "}\n" +
		"http: {listen: ''}\nflush: {interval: 1s}\n"
	name := filepath.Join(dir, map[bool]string{true: "strict.yaml", false: "fixed.yaml"}[contactRequired])
	if err := os.WriteFile(name, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestDLQReplayAfterMappingFix: a mapping refuses the smart plugs' records
// (they have no contact); once fixed, `dlq replay` writes every one of them
// into the table once and empties the stream, and a second replay writes
// nothing. ls and show say what the letters are.
func TestDLQReplayAfterMappingFix(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "sensor-events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	broker := cluster.ListenAddrs()[0]
	const records = 400
	if code, _, errs := run(t, "produce", "--brokers", broker, "--count", "400"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	dir := t.TempDir()
	table := filepath.Join(dir, "sensor_events")
	listen := freeAddr(t)
	strict := dlqConfig(t, dir, table, broker, listen, true)
	fixed := dlqConfig(t, dir, table, broker, listen, false)
	code, summary, errs := run(t, "run", "--config", strict, "--until-latest", "--json")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	var version int64
	rows := func() int64 {
		t.Helper()
		code, out, errs := run(t, "inspect", "snapshot", "--table", table, "--json")
		if code != 0 {
			t.Fatalf("inspect: exit %d: %s", code, errs)
		}
		var s struct{ Version, NumRecords int64 }
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		version = s.Version
		return s.NumRecords
	}
	letters := func() []letterJSON {
		t.Helper()
		code, out, errs := run(t, "dlq", "ls", "--config", fixed, "--limit", "0", "--json")
		if code != 0 {
			t.Fatalf("dlq ls: exit %d: %s", code, errs)
		}
		var ls []letterJSON
		if err := json.Unmarshal([]byte(out), &ls); err != nil {
			t.Fatal(err)
		}
		return ls
	}
	inTable := rows()
	dead := letters()
	if len(dead) == 0 || inTable+int64(len(dead)) != records {
		t.Fatalf("before the fix: %d rows + %d letters, want %d in all, some letters", inTable, len(dead), records)
	}
	// run --until-latest --json said so on stdout, alone.
	var sum daemon.Summary
	if err := json.Unmarshal([]byte(summary), &sum); err != nil {
		t.Fatalf("run --json printed %q: %v", summary, err)
	}
	if sum.Rows != inTable || sum.DeadLetters != int64(len(dead)) || sum.Commits < 1 || len(sum.Tables) != 1 || sum.Tables[0].Rows != inTable {
		t.Errorf("run --json summary %+v; the table holds %d rows, the DLQ %d letters", sum, inTable, len(dead))
	}
	if !strings.Contains(dead[0].Reason, "contact") {
		t.Errorf("letter reason %q does not name the column", dead[0].Reason)
	}
	code, out, errs := run(t, "dlq", "show", "1", "--config", fixed)
	if code != 0 || !strings.Contains(out, "reason") || !strings.Contains(out, `"device_type":"smart_plug"`) {
		t.Errorf("dlq show 1: exit %d\n%s%s", code, out, errs)
	}

	code, out, errs = run(t, "dlq", "replay", "--config", fixed, "--batch", "50", "--json")
	if code != 0 {
		t.Fatalf("dlq replay: exit %d: %s%s", code, out, errs)
	}
	// A replayed letter is gone, said in deltaflow's words, not the
	// JetStream API's (issue 30: "nats: API error: code=404 err_code=10037").
	if code, _, errs := run(t, "dlq", "show", "1", "--config", fixed); code == 0 || !strings.Contains(errs, "no letter at sequence 1") ||
		strings.Contains(errs, "err_code") {
		t.Errorf("dlq show 1 after the replay: exit %d: %s", code, errs)
	}
	var res dlqreplay.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Replayed != len(dead) || res.FailedCount != 0 || len(res.Versions) < 2 {
		t.Errorf("replay: %+v, want %d letters replayed over several commits", res, len(dead))
	}
	if got := rows(); got != records {
		t.Errorf("table holds %d rows after the replay, want %d", got, records)
	}
	if left := letters(); len(left) != 0 {
		t.Errorf("%d letters left in the stream", len(left))
	}
	before := version
	code, out, errs = run(t, "dlq", "replay", "--config", fixed)
	if code != 0 || !strings.Contains(out, "no dead letters") || rows() != records || version != before {
		t.Errorf("second replay: exit %d, version %d after %d\n%s%s", code, version, before, out, errs)
	}
}
