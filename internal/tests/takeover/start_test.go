package takeover

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// TestStartPositions: on fresh tables, kafka.start_offsets,
// kafka.start_timestamp and `seek --group|--offsets|--timestamp` make run
// start exactly there:
// the table holds every record from the start position on, once, and none
// before it.
func TestStartPositions(t *testing.T) {
	r := &rig{t: t, brokers: testenv.Kafka(t), nats: testenv.NATS(t), topic: scenario.Unique("start"), bin: scenario.Binary(t)}
	r.produce(300, 6)
	time.Sleep(1100 * time.Millisecond) // record timestamps are milliseconds
	at := time.Now()
	before := testenv.HighWatermarks(t, r.brokers, r.topic)
	r.produce(300, 7)
	work := t.TempDir()

	// skipped returns how many records a start at next skips.
	skipped := func(next map[int32]int64) int {
		n := 0
		for _, o := range next {
			n += int(o)
		}
		return n
	}
	expect := func(t *testing.T, table string, skip int) {
		t.Helper()
		store, err := storage.NewLocal(table)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := scenario.Account(t.Context(), scenario.Source{Brokers: r.brokers, Topic: r.topic, Store: store, NATSURL: r.nats, Table: "sensor_events"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("account: %s", rep)
		if rep.Duplicates != 0 || rep.Unexpected != 0 || rep.Missing != skip || rep.Rows != 600-skip {
			t.Fatalf("want the %d records before the start missing and every other once: %s", skip, rep)
		}
	}

	t.Run("kafka.start_offsets", func(t *testing.T) {
		table := filepath.Join(work, "offsets")
		next := map[int32]int64{0: 10, 1: 25} // partition 2: start_offset earliest
		r.with(t).run(table, map[string]any{"kafka": map[string]any{"start_offsets": next}})
		expect(t, table, skipped(next))
	})
	t.Run("kafka.start_timestamp", func(t *testing.T) {
		table := filepath.Join(work, "timestamp")
		r.with(t).run(table, map[string]any{"kafka": map[string]any{"start_timestamp": at.UTC().Format(time.RFC3339Nano)}})
		expect(t, table, skipped(before))
	})
	group := scenario.Unique("connect")
	groupNext := map[int32]int64{0: 3, 1: 4, 2: 5}
	commitGroup(t, r.brokers, group, r.topic, groupNext)
	for _, tc := range []struct {
		name string
		args []string
		skip int
	}{
		{"seek --group", []string{"--group", group}, skipped(groupNext)},
		{"seek --offsets", []string{"--offsets", "0:7,2:9"}, 16},
		{"seek --timestamp", []string{"--timestamp", at.UTC().Format(time.RFC3339Nano)}, skipped(before)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := filepath.Join(work, strings.ReplaceAll(tc.name, " ", ""))
			args := append([]string{"seek", "--table", table, "--topic", r.topic, "--brokers", strings.Join(r.brokers, ","),
				"--config", scenario.WriteConfig(t, "sensor_events", nil)}, tc.args...)
			out, err := r.with(t).deltaflow(args...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.name, err, out)
			}
			t.Logf("%s:\n%s", tc.name, out)
			r.with(t).run(table, nil)
			expect(t, table, tc.skip)
		})
	}
}

// commitGroup commits offsets for group, as a Kafka-Connect-like consumer
// that read the topic up to there would have.
func commitGroup(t *testing.T, brokers []string, group, topic string, next map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var o kadm.Offsets
	for p, at := range next {
		o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	res, err := kadm.NewClient(cl).CommitOffsets(t.Context(), group, o)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets of group %s: %v", group, err)
	}
}
