package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// hostileCase is one hostile Kafka record and where it must end up: in the
// DLQ with reason, or (reason "") in the table as row, in the partition
// directory dir/event_date=<row's event_date>.
type hostileCase struct {
	name   string
	key    []byte
	value  []byte // nil: a tombstone
	reason string
	dir    string            // the device_type segment, Spark-escaped
	row    map[string]string // rendered by hostileRender
	// permissive is the outcome under table.mode permissive when it
	// differs: a value that cannot be cast is null there, so the record
	// lands in the table.
	permissive *hostileCase
}

// orNulls sets the case's outcome in permissive mode: the row want in the
// smart_plug partition.
func (c hostileCase) orNulls(want map[string]string) hostileCase {
	c.permissive = &hostileCase{name: c.name, key: c.key, value: c.value, dir: "device_type=smart_plug", row: want}
	return c
}

// hostileOutcomes are the cases by offset as a daemon in the given mode
// must place them.
func hostileOutcomes(byOffset map[int64]*hostileCase, permissive bool) map[int64]*hostileCase {
	out := make(map[int64]*hostileCase, len(byOffset))
	for off, c := range byOffset {
		out[off] = c
		if permissive && c.permissive != nil {
			out[off] = c.permissive
		}
	}
	return out
}

const (
	hostileTime    = "2026-06-22T09:15:30Z"
	hostileTimeOut = "2026-06-22T09:15:30.000000" // as hostileRender shows it
	hostileDate    = "2026-06-22"
	hostileNull    = "<null>"
	// hostileHuge is the size of the 10 MB record: above deltaflow's
	// max_record_bytes (1 MiB) and NATS's max_payload (1 MiB).
	hostileHuge = 10 << 20
)

// hostileRecord is a sensor record with the given device_type, ingested_at
// and payload (a JSON text carried in a string, as the sensors send it).
func hostileRecord(deviceType, ingestedAt, payload string) []byte {
	dt, _ := json.Marshal(deviceType)
	ts, _ := json.Marshal(ingestedAt)
	pl, _ := json.Marshal(payload)
	return []byte(`{"device_id":"dev-1","device_type":` + string(dt) + `,"ingested_at":` + string(ts) + `,"payload":` + string(pl) + `}`)
}

// hostileWant is the row of a hostileRecord with overrides.
func hostileWant(deviceType string, over map[string]string) map[string]string {
	w := map[string]string{"device_id": "dev-1", "device_type": deviceType, "event_time": hostileTimeOut,
		"event_date": hostileDate, "power": hostileNull, "plug_state": hostileNull}
	for k, v := range over {
		w[k] = v
	}
	return w
}

// hostileCases are the hostile classes (and a few neighbours), each
// with its expected outcome under the default strict mapping.
func hostileCases() []hostileCase {
	plug := func(payload string) []byte { return hostileRecord("smart_plug", hostileTime, payload) }
	dlq := func(name string, value []byte, reason string) hostileCase {
		return hostileCase{name: name, value: value, reason: reason}
	}
	row := func(name string, value []byte, dir string, want map[string]string) hostileCase {
		return hostileCase{name: name, value: value, dir: dir, row: want}
	}
	valid := plug(`{"power":12.5,"state":"ON"}`)
	huge := []byte(`{"device_id":"` + strings.Repeat("x", hostileHuge) + `"}`)
	deepPayload := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	at := func(ts string) []byte { return hostileRecord("smart_plug", ts, "{}") }
	nulls := hostileWant("smart_plug", nil)
	cases := []hostileCase{
		row("valid", valid, "device_type=smart_plug", hostileWant("smart_plug", map[string]string{"power": "12.5", "plug_state": "ON"})),
		dlq("not JSON", []byte("hello, not json"), "not JSON"),
		dlq("truncated JSON", valid[:len(valid)-10], "not JSON"),
		dlq("empty value", []byte{}, "empty value"),
		dlq("tombstone", nil, "null value (tombstone)"),
		dlq("array", []byte(`[{"device_id":"a"}]`), "not a JSON object"),
		dlq("number", []byte(`42`), "not a JSON object"),
		dlq("missing device_id", []byte(`{"device_type":"smart_plug","ingested_at":"`+hostileTime+`"}`), "missing required field device_id"),
		dlq("device_type null", []byte(`{"device_id":"a","device_type":null,"ingested_at":"`+hostileTime+`"}`), "missing required field device_type"),
		dlq("payload not a string", []byte(`{"device_id":"dev-1","device_type":"smart_plug","ingested_at":"`+hostileTime+`","payload":12}`),
			"payload: not a JSON string").orNulls(nulls),
		dlq("payload not JSON", plug(`power=1`), "payload: not JSON").orNulls(nulls),
		dlq("wrong type", plug(`{"power":"abc","state":"ON"}`), `power: cannot cast "abc" to double`).
			orNulls(hostileWant("smart_plug", map[string]string{"plug_state": "ON"})),
		dlq("integer overflow", plug(`{"linkquality":2147483648}`), "linkquality: integer overflow").orNulls(nulls),
		dlq("huge integer", plug(`{"linkquality":99999999999999999999999}`), "linkquality: integer overflow").orNulls(nulls),
		dlq("NaN", plug(`{"power":NaN}`), "power: not a finite number").orNulls(nulls),
		dlq("Infinity", plug(`{"power":Infinity}`), "payload: not JSON").orNulls(nulls), // fastjson reads only "inf"
		dlq("inf", plug(`{"power":-inf}`), "power: not a finite number").orNulls(nulls),
		dlq("10 MB record", huge, fmt.Sprintf("value too large (%d bytes > %d)", len(huge), 1<<20)),
		dlq("invalid UTF-8", []byte("{\"device_id\":\"a\",\"device_type\":\"x\xff\",\"ingested_at\":\""+hostileTime+"\"}"), "device_type: invalid UTF-8"),
		// Written raw: json.Marshal would replace the bad byte.
		dlq("invalid UTF-8 in payload", []byte("{\"device_id\":\"a\",\"device_type\":\"x\",\"ingested_at\":\""+hostileTime+"\",\"payload\":\"{\\\"state\\\":\\\"O\xc3\\\"}\"}"), "plug_state: invalid UTF-8"),
		dlq("unparsable timestamp", at("yesterday"), `event_time: unparsable timestamp "yesterday"`),
		dlq("year 0 timestamp", at("0000-12-31T00:00:00Z"), "event_time: timestamp out of range (years 0001-9999)"),
		dlq("10,000-deep nesting", []byte(strings.Repeat("[", 10000)+strings.Repeat("]", 10000)), "nesting too deep"),
		dlq("10,000-deep payload", plug(deepPayload), "payload: nesting too deep").orNulls(nulls),
		{name: "binary key", key: []byte("k\x00\n\xff"), value: []byte("garbage"), reason: "not JSON"},
		// A key whose base64 alone passes NATS's max_payload: the letter
		// must still fit (its key header cut, marked with size and hash).
		{name: "800 KiB binary key", key: hostileBinaryKey(800 << 10), value: []byte("garbage"), reason: "not JSON"},
		// A partition directory name no store takes (255 bytes a segment).
		dlq("device_type of 300 bytes", hostileRecord(strings.Repeat("d", 300), hostileTime, "{}"),
			"device_type: partition directory name of 312 bytes (escaped) is longer than the 255 bytes a store takes"),
		row("zoneless timestamp", at("2026-06-22T09:15:30"), "device_type=smart_plug", hostileWant("smart_plug", nil)),
		row("offset timestamp", at("2026-06-22T01:15:30+02:00"), "device_type=smart_plug",
			hostileWant("smart_plug", map[string]string{"event_time": "2026-06-21T23:15:30.000000", "event_date": "2026-06-21"})),
		row("year 1 timestamp", at("0001-01-01T00:00:00Z"), "device_type=smart_plug",
			hostileWant("smart_plug", map[string]string{"event_time": "0001-01-01T00:00:00.000000", "event_date": "0001-01-01"})),
		row("year 9999 timestamp", at("9999-12-31T23:59:59.999999Z"), "device_type=smart_plug",
			hostileWant("smart_plug", map[string]string{"event_time": "9999-12-31T23:59:59.999999", "event_date": "9999-12-31"})),
		row("duplicate keys", []byte(`{"device_id":"first","device_id":"second","device_type":"smart_plug","ingested_at":"`+hostileTime+`"}`),
			"device_type=smart_plug", hostileWant("smart_plug", map[string]string{"device_id": "first"})),
		row("NUL bytes", []byte(`{"device_id":"a\u0000b","device_type":"x\u0000","ingested_at":"`+hostileTime+`","payload":"{\"state\":\"\\u0000\"}"}`),
			"device_type=x%00", hostileWant("x\x00", map[string]string{"device_id": "a\x00b", "plug_state": "\x00"})),
		row("NaN in an unmapped field", []byte(`{"device_id":"dev-1","device_type":"smart_plug","ingested_at":"`+hostileTime+`","x":nan}`),
			"device_type=smart_plug", hostileWant("smart_plug", nil)),
		row("payload null", []byte(`{"device_id":"dev-1","device_type":"smart_plug","ingested_at":"`+hostileTime+`","payload":null}`),
			"device_type=smart_plug", hostileWant("smart_plug", nil)),
		// An empty partition value is null in Delta, as Spark writes it.
		row("device_type empty", hostileRecord("", hostileTime, "{}"), "device_type="+delta.NullPartitionDir, hostileWant(hostileNull, nil)),
	}
	// Partition values that would climb out of the table root or split a
	// directory if written raw: Spark's escaping keeps each one segment.
	for _, dt := range []struct{ value, dir string }{
		{"../../etc", "..%2F..%2Fetc"},
		{"..", ".."},
		{"a/b", "a%2Fb"},
		{"x=y", "x%3Dy"},
		{"%2F", "%252F"},
		{"line\nbreak", "line%0Abreak"},
		{"🔌 plug", "🔌 plug"},
		{`C:\win`, "C%3A%5Cwin"},
	} {
		cases = append(cases, row("device_type "+strconv.Quote(dt.value), hostileRecord(dt.value, hostileTime, `{"power":1}`),
			"device_type="+dt.dir, hostileWant(dt.value, map[string]string{"power": "1"})))
	}
	return cases
}

// hostileBinaryKey is an n-byte key of every byte value in turn.
func hostileBinaryKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// hostileRender renders a table value as deltars.py does, so that the Go
// reader and delta-rs compare against the same expectations.
func hostileRender(col string, v any) string {
	switch x := v.(type) {
	case nil:
		return hostileNull
	case time.Time:
		if col == "event_date" {
			return x.UTC().Format("2006-01-02")
		}
		return x.UTC().Format("2006-01-02T15:04:05.000000")
	default:
		return fmt.Sprint(x)
	}
}

// hostileDaemon is one deltaflow process of the scenario and its table.
type hostileDaemon struct {
	name       string
	permissive bool   // table.mode
	table      string // table.name: names the DLQ stream
	uri        string
	store      storage.Store
	http       string
	d          *scenario.Daemon
}

// TestHostileInput streams every hostile class through real Kafka (each
// record once before the daemons start and once while they run) into two
// deltaflow processes, one writing a table on MinIO in strict mode and one
// on local disk in permissive mode, and checks each record individually: it is in the table with the right
// values, in a partition directory escaped like Spark's and inside the table
// root (every object of the bucket and every file of the directory is
// listed), as delta-rs reads it too; or it is in the DLQ with its reason.
// Neither process crashes, and both exit 0 on SIGTERM.
func TestHostileInput(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	brokers := testenv.Kafka(t)
	natsURL := testenv.NATS(t)
	s3 := testenv.MinIO(t)
	testenv.Python(t) // the oracle, before the run
	bin := scenario.Binary(t)
	srv := scenario.Servers{Brokers: brokers, NATSURL: natsURL, S3: s3}
	ctx := t.Context()

	topic := scenario.Unique("hostile")
	cases := hostileCases()
	// Every case once before the daemons start and once while they run.
	byOffset := map[int64]*hostileCase{}
	hostileProduce(t, brokers, topic, cases, byOffset)

	// The table prefix sits one level down, so an escape upwards would
	// still land in the bucket, where the listing below sees it.
	s3Store, err := storage.NewS3(storage.S3Config{Endpoint: s3.Endpoint, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey,
		Bucket: s3.Bucket, Prefix: "lake/sensor_events"})
	if err != nil {
		t.Fatal(err)
	}
	localBase := t.TempDir()
	localRoot := filepath.Join(localBase, "lake", "sensor_events")
	localStore, err := storage.NewLocal(localRoot)
	if err != nil {
		t.Fatal(err)
	}
	daemons := []*hostileDaemon{
		{name: "s3-strict", table: scenario.Unique("hostile_s3"), uri: "s3://" + s3.Bucket + "/lake/sensor_events", store: s3Store},
		{name: "local-permissive", permissive: true, table: scenario.Unique("hostile_local"), uri: "file://" + localRoot, store: localStore},
	}
	for _, hd := range daemons {
		hd.http = fmt.Sprintf("127.0.0.1:%d", scenario.FreePort(t))
		var sections map[string]any
		if hd.permissive {
			sections = map[string]any{"table": map[string]any{"mode": "permissive"}}
		}
		cfg := scenario.WriteConfig(t, hd.table, sections)
		env := srv.Env(topic, "g-"+hd.table, hd.uri, hd.http)
		hd.d = scenario.Start(t, "deltaflow-"+hd.name, bin, env, "run", "--config", cfg)
	}
	for _, hd := range daemons {
		if err := scenario.WaitFor(3*time.Minute, func() bool {
			snap, err := delta.NewTable(hd.store).Snapshot(ctx)
			return (err == nil && snap.Version() >= 1) || !hd.d.Running() // v0 only creates the table
		}); err != nil || !hd.d.Running() {
			t.Fatalf("%s: no first commit: %v\n%s", hd.name, err, hd.d.Tail(6000))
		}
	}
	hostileProduce(t, brokers, topic, cases, byOffset)

	for _, hd := range daemons {
		src := scenario.Source{Brokers: brokers, Topic: topic, Store: hd.store, NATSURL: natsURL, Table: hd.table}
		var rep scenario.Report
		start := time.Now()
		err := scenario.WaitFor(4*time.Minute, func() bool {
			if !hd.d.Running() {
				return true
			}
			r, err := scenario.Account(ctx, src)
			rep = r
			return err == nil && r.Missing == 0 && r.Produced == len(byOffset)
		})
		if !hd.d.Running() {
			t.Fatalf("%s: deltaflow exited on hostile input\n%s", hd.name, hd.d.Tail(6000))
		}
		if err != nil {
			t.Fatalf("%s: not every record accounted for after %s: %v\n%s", hd.name, time.Since(start).Round(time.Second), rep, hd.d.Tail(6000))
		}
		t.Logf("%s table: hostile records: produced %d, rows %d, DLQ %d, duplicates %d, missing %d (%s)",
			hd.name, rep.Produced, rep.Rows, rep.DLQ, rep.Duplicates, rep.Missing, rep)
		if !rep.OK() {
			t.Errorf("%s: not exactly once: %v", hd.name, rep)
		}
		want := hostileOutcomes(byOffset, hd.permissive)
		hostileCheckDLQ(t, natsURL, hd.table, topic, want)
		hostileCheckTable(t, hd.store, want)
		hostileCheckDeltaRS(t, hd.uri, want)
		hostileCheckMetrics(t, hd.http, hd.table, want)
	}
	hostileCheckBucket(t, s3Store, s3, "lake/sensor_events/", hostileOutcomes(byOffset, false))
	hostileCheckDir(t, localBase, localRoot, hostileOutcomes(byOffset, true))

	for _, hd := range daemons {
		if err := hd.d.Stop(30 * time.Second); err != nil {
			t.Errorf("%s: SIGTERM: %v\n%s", hd.name, err, hd.d.Tail(4000))
		}
		if log := hd.d.Log.String(); strings.Contains(log, "panic") {
			t.Errorf("%s: the log shows a panic\n%s", hd.name, hd.d.Tail(6000))
		}
	}
}

// hostileProduce creates a one-partition topic that accepts the 10 MB
// record, unless it exists, and writes the cases in order, adding them to
// byOffset by their offsets.
func hostileProduce(t *testing.T, brokers []string, topic string, cases []hostileCase, byOffset map[int64]*hostileCase) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchMaxBytes(16<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	maxBytes := strconv.Itoa(16 << 20)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &maxBytes}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	recs := make([]*kgo.Record, len(cases))
	for i, c := range cases {
		key := c.key
		if key == nil {
			key = []byte(c.name)
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Key: key, Value: c.value}
	}
	for i, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Fatalf("produce %q: %v", cases[i].name, r.Err)
		}
		if byOffset[r.Record.Offset] != nil {
			t.Fatalf("offset %d produced twice", r.Record.Offset)
		}
		byOffset[r.Record.Offset] = &cases[i]
	}
}

// hostileCheckDLQ: every letter is a case that belongs in the DLQ, with its
// reason and its original value (truncated, and saying so, when larger than
// NATS's max_payload), and every such case has a letter.
func hostileCheckDLQ(t *testing.T, natsURL, table, topic string, byOffset map[int64]*hostileCase) {
	t.Helper()
	seen := map[int64]bool{}
	err := scenario.Letters(t.Context(), natsURL, table, func(msg jetstream.Msg) error {
		h := msg.Headers()
		off, err := strconv.ParseInt(h.Get(bridge.HeaderOffset), 10, 64)
		c := byOffset[off]
		if err != nil || c == nil || h.Get(bridge.HeaderTopic) != topic {
			t.Errorf("letter %v is none of the cases", h)
			return nil
		}
		seen[off] = true
		if c.reason == "" {
			t.Errorf("%s: in the DLQ (%q), want it in the table", c.name, h.Get(bridge.HeaderError))
			return nil
		}
		// The header is the mapping error: its reason, then the column
		// and source it concerns.
		if got := h.Get(bridge.HeaderError); got != "mapping: "+c.reason && !strings.HasPrefix(got, "mapping: "+c.reason+" (") {
			t.Errorf("%s: DLQ reason %q, want %q", c.name, got, c.reason)
		}
		body := msg.Data()
		if n := h.Get(bridge.HeaderTruncated); n != "" {
			if n != strconv.Itoa(len(c.value)) || !bytes.HasPrefix(c.value, body) || len(body) >= len(c.value) {
				t.Errorf("%s: truncated letter: header %s, body %d bytes, value %d bytes", c.name, n, len(body), len(c.value))
			}
		} else if !bytes.Equal(body, c.value) {
			t.Errorf("%s: letter body %q, want the record's value %q", c.name, hostileShort(body), hostileShort(c.value))
		}
		if len(c.value) > 1<<20 && h.Get(bridge.HeaderTruncated) == "" {
			t.Errorf("%s: a %d-byte value was not marked truncated", c.name, len(c.value))
		}
		if c.key != nil {
			if h.Get(bridge.HeaderKeyEncoding) != "base64" || h.Get(bridge.HeaderKey) == string(c.key) {
				t.Errorf("%s: binary key header %q (encoding %q), want base64", c.name, hostileShort([]byte(h.Get(bridge.HeaderKey))), h.Get(bridge.HeaderKeyEncoding))
			}
			if cut := len(c.key) > 4<<10; cut != (h.Get(bridge.HeaderKeyTruncated) == strconv.Itoa(len(c.key))) {
				t.Errorf("%s: %s = %q for a %d-byte key", c.name, bridge.HeaderKeyTruncated, h.Get(bridge.HeaderKeyTruncated), len(c.key))
			}
		} else if h.Get(bridge.HeaderKey) != c.name {
			t.Errorf("%s: key header %q", c.name, h.Get(bridge.HeaderKey))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read DLQ of %s: %v", table, err)
	}
	for off, c := range byOffset {
		if c.reason != "" && !seen[off] {
			t.Errorf("%s (offset %d): not in the DLQ, want reason %q", c.name, off, c.reason)
		}
	}
}

func hostileShort(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// hostileCheckTable reads the table with deltaflow's own reader: every row
// is a table case with its values, in a file of its escaped partition
// directory; every table case has exactly one row.
func hostileCheckTable(t *testing.T, store storage.Store, byOffset map[int64]*hostileCase) {
	t.Helper()
	snap, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatalf("snapshot %s: %v", store.URI(), err)
	}
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, f := range schema.Fields {
		col[f.Name] = i
	}
	seen := map[int64]int{}
	for _, add := range snap.Files() {
		key, err := delta.DecodePath(add.Path)
		if err != nil {
			t.Errorf("add path %q: %v", add.Path, err)
			continue
		}
		if err := storage.CheckKey(key); err != nil || !strings.HasPrefix(key, "device_type=") {
			t.Errorf("data file %q is not inside a partition directory of the table: %v", key, err)
		}
		for r, err := range delta.DataFileRows(t.Context(), store, schema, snap.PartitionColumns(), add) {
			if err != nil {
				t.Fatalf("read %s: %v", key, err)
			}
			off, _ := delta.AsInt64(r[col[scenario.OffsetColumn]])
			c := byOffset[off]
			if c == nil {
				t.Errorf("row at offset %d is none of the cases", off)
				continue
			}
			seen[off]++
			if c.reason != "" {
				t.Errorf("%s: in the table, want it in the DLQ with %q", c.name, c.reason)
				continue
			}
			if want := c.dir + "/event_date=" + c.row["event_date"] + "/"; !strings.HasPrefix(key, want) {
				t.Errorf("%s: file %q, want it under %q", c.name, key, want)
			}
			for name, want := range c.row {
				if got := hostileRender(name, r[col[name]]); got != want {
					t.Errorf("%s: %s = %q, want %q", c.name, name, got, want)
				}
			}
		}
	}
	for off, c := range byOffset {
		if c.reason == "" && seen[off] != 1 {
			t.Errorf("%s (offset %d): %d rows in the table, want 1", c.name, off, seen[off])
		}
	}
}

// hostileCheckDeltaRS reads the table with delta-rs and compares every row
// with its case.
func hostileCheckDeltaRS(t *testing.T, uri string, byOffset map[int64]*hostileCase) {
	t.Helper()
	rows := scenario.DeltaRS(t, nil, uri).Rows
	seen := map[int64]bool{}
	for _, r := range rows {
		offF, _ := r[scenario.OffsetColumn].(float64)
		off := int64(offF)
		c := byOffset[off]
		if c == nil || c.reason != "" || seen[off] {
			t.Errorf("delta-rs: row at offset %d is not a table case read once", off)
			continue
		}
		seen[off] = true
		for name, want := range c.row {
			if got := hostileRender(name, r[name]); got != want {
				t.Errorf("delta-rs: %s: %s = %q, want %q", c.name, name, got, want)
			}
		}
	}
	for off, c := range byOffset {
		if c.reason == "" && !seen[off] {
			t.Errorf("delta-rs: %s (offset %d) missing", c.name, off)
		}
	}
	t.Logf("delta-rs reads the %d rows of %s as expected", len(rows), uri)
}

// hostileCheckMetrics: /metrics counts every DLQ case.
func hostileCheckMetrics(t *testing.T, addr, table string, byOffset map[int64]*hostileCase) {
	t.Helper()
	want := 0
	for _, c := range byOffset {
		if c.reason != "" {
			want++
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// The counter has one series per reason class; their sum is every
	// dead letter of the table.
	got, series := 0, 0
	tableLabel := fmt.Sprintf("table=%q", table)
	for line := range strings.Lines(string(body)) {
		labels, value, ok := strings.Cut(strings.TrimSpace(line), "} ")
		if !ok || !strings.HasPrefix(labels, "deltaflow_dlq_records_total{") || !strings.Contains(labels, tableLabel) {
			continue
		}
		n, err := strconv.Atoi(value)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		got += n
		series++
	}
	if series == 0 || got != want {
		t.Errorf("/metrics: deltaflow_dlq_records_total{%s} sums to %d over %d reasons, want %d\n%s", tableLabel, got, series, want, body)
	}
}

// hostileCheckBucket lists the whole bucket: every object is under the
// table's prefix, and each table case's escaped directory holds a file.
func hostileCheckBucket(t *testing.T, s *storage.S3, cfg storage.S3Config, prefix string, byOffset map[int64]*hostileCase) {
	t.Helper()
	var keys []string
	for obj := range s.Client().ListObjects(t.Context(), cfg.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list bucket %s: %v", cfg.Bucket, obj.Err)
		}
		keys = append(keys, obj.Key)
		if !strings.HasPrefix(obj.Key, prefix) {
			t.Errorf("object %q is outside the table root %q", obj.Key, prefix)
		}
	}
	hostileCheckDirs(t, "bucket "+cfg.Bucket, prefix, keys, byOffset)
	t.Logf("bucket %s: %d objects, all under %s", cfg.Bucket, len(keys), prefix)
}

// hostileCheckDir walks everything under base: every file is under root,
// and each table case's escaped directory holds a file.
func hostileCheckDir(t *testing.T, base, root string, byOffset map[int64]*hostileCase) {
	t.Helper()
	var keys []string
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(os.PathSeparator)) {
			t.Errorf("file %q is outside the table root %q", path, root)
			return nil
		}
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hostileCheckDirs(t, "directory "+base, "", keys, byOffset)
	t.Logf("directory %s: %d files, all under %s", base, len(keys), root)
}

func hostileCheckDirs(t *testing.T, where, prefix string, keys []string, byOffset map[int64]*hostileCase) {
	t.Helper()
	for _, c := range byOffset {
		if c.reason != "" {
			continue
		}
		dir := prefix + c.dir + "/event_date=" + c.row["event_date"] + "/"
		found := false
		for _, k := range keys {
			if strings.HasPrefix(k, dir) && strings.HasSuffix(k, ".parquet") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: %s: no data file under %q", where, c.name, dir)
		}
	}
}
