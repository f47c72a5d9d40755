package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

// TestAvroTypesMatchFromAvro: Spark's from_avro (spark-avro 3.5.1) is the
// oracle of the Avro type mapping. A topic confluent-kafka's
// AvroSerializer wrote (a field of every Avro type a column is derived
// from, decimals as bytes and fixed of up to 9, 18 and 38 digits among
// them) goes into a registry table deltaflow derives the columns of; Spark
// decodes the same records' bodies with from_avro and reads the table:
// every column has the type from_avro gives it, both hold the same rows,
// and filters on the decimal columns find as many rows in the table (with
// Delta's data skipping over its stats, and the Parquet reader's over its
// row groups' bounds) as in from_avro's. Its local-timestamp-millis and
// -micros fields are timestamp_ntz columns, which Spark reads.
//
// The same JVM is the oracle of timestamp_ntz columns fed from JSON: a
// topic of local date-times in every form Spark's from_json takes or
// refuses (see localTimes) goes into a table with a declared `type:
// timestamp_ntz` column, mode permissive; from_json decodes the same
// records: both hold the same rows (from_json's nulls are the table's
// nulls), and delta-rs and DuckDB read the table's values as from_json's.
// The table carries the timestampNtz table feature.
//
// And the same JVM reads the tables deltaflow derives from topics
// confluent-kafka's JSON Schema, Protobuf and Avro serializers wrote (the
// Avro one's struct, array, map and binary columns with the types
// from_avro gives them, the JSON Schema one's struct and array columns),
// the Avro table whose struct columns gained fields mid-stream
// (avroNestedEvolution: the old rows null in them), and the plain
// Protobuf topics' struct and array columns (newProtoFileTopic) and map
// of int32 keys (newProtoMapKeysTopic): Spark
// finds exactly the rows produced, with the column types expected, as
// delta-rs does in the registry tests; and a table of struct, array and
// map columns deltaflow wrote (nestedSparkTable), value for value.
func TestAvroTypesMatchFromAvro(t *testing.T) {
	r := newRegistryTopic(t, "oracle-readings", "avro")
	r.uri = filepath.Join(t.TempDir(), "readings") // Spark reads a local table
	schema := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata", "reading.avsc")
	r.produce("avroproduce.py", 7, registryBad, "--schema", schema)
	r.run()
	local := newLocalTimesTopic(t)
	reads := sparkReadTopics(t)
	py, dir := testenv.Spark(t)
	var got struct {
		OracleTypes, TableTypes map[string]string
		OracleRows, TableRows   int
		Missing, Extra          []map[string]any
		FilterChecks            int
		FilterMismatches        []map[string]any
		JSON                    struct {
			OracleTypes, TableTypes map[string]string
			Rows                    []map[string]any // from_json's, its timestamps as deltars.py renders them
			TableRows               int
			Missing, Extra          []map[string]any
		}
		Reads map[string]struct {
			Types map[string]string
			Rows  json.RawMessage
		}
	}
	args := []string{strings.Join(r.brokers, ","), r.topic, schema, r.uri, local.topic, "i long, t timestamp_ntz", local.uri}
	for name, rt := range reads {
		args = append(args, name+"="+rt.uri)
	}
	nestedURI, nestedWant := nestedSparkTable(t)
	args = append(args, "nested="+nestedURI)
	testenv.RunSparkJSON(t, &got, py, dir, "avro_oracle.py", args...)
	if read := got.Reads["nested"]; !slices.Equal(rowSet(t, decodeRows(t, read.Rows), nil), rowSet(t, decodeRows(t, []byte(nestedWant)), nil)) {
		t.Errorf("Spark reads deltaflow's struct, array and map columns as %v (types %v), want %s", rowSet(t, decodeRows(t, read.Rows), nil), read.Types, nestedWant)
	}
	local.check(got.JSON.OracleTypes, got.JSON.TableTypes, got.JSON.Rows, got.JSON.TableRows, got.JSON.Missing, got.JSON.Extra)
	for name, rt := range reads {
		read := got.Reads[name]
		fields := slices.Collect(maps.Keys(read.Types))
		have, want := rowSet(t, decodeRows(t, read.Rows), fields), rowSet(t, rt.want, fields)
		if len(fields) == 0 || !slices.Equal(have, want) {
			t.Errorf("Spark reads the %s table as %d rows of columns %v, not the %d produced", name, len(have), read.Types, len(want))
			for i := range min(len(have), len(want)) {
				if have[i] != want[i] {
					t.Errorf("first difference:\n spark    %s\n produced %s", have[i], want[i])
					break
				}
			}
		}
		if want := sparkNestedTypes[name]; want != nil && !maps.Equal(read.Types, want) {
			t.Errorf("Spark reads the struct, array and map columns of the %s table as %v, want %v", name, read.Types, want)
		}
		t.Logf("Spark reads the %s table: %d rows as produced, columns %v", name, len(have), read.Types)
	}
	if !maps.Equal(got.OracleTypes, got.TableTypes) {
		t.Errorf("column types differ from from_avro's:\n table   %v\n oracle  %v", got.TableTypes, got.OracleTypes)
	}
	if got.OracleRows != registryCount || got.TableRows != registryCount || len(got.Missing) > 0 || len(got.Extra) > 0 {
		t.Errorf("from_avro decodes %d rows, the table holds %d (want %d each); missing from the table %v, extra %v",
			got.OracleRows, got.TableRows, registryCount, got.Missing, got.Extra)
	}
	if got.FilterChecks == 0 || len(got.FilterMismatches) > 0 {
		t.Errorf("%d filters on decimal columns compared; these find other rows in the table than in from_avro's: %v",
			got.FilterChecks, got.FilterMismatches)
	}
	t.Log("types: " + fmt.Sprint(got.TableTypes) + ", rows " + strconv.Itoa(got.TableRows) +
		", decimal filters " + strconv.Itoa(got.FilterChecks))
}

// sparkReadTopics are a json_schema, a protobuf and an Avro registry topic
// (the Avro one of trip.avsc's struct, array, map and binary columns), a
// json_schema one of trip.schema.json's struct and array columns (each
// with records confluent-kafka's serializer wrote and none bad),
// avroNestedEvolution's, whose nested columns gained fields mid-stream,
// newProtoFileTopic's plain Protobuf one with its struct and array
// columns and newProtoMapKeysTopic's with its map of int32 keys, by name, with the local tables deltaflow made of them for
// Spark to read and the rows as pyspark renders them (sparkRows).
func sparkReadTopics(t *testing.T) map[string]*registryTopic {
	t.Helper()
	testdata := filepath.Join(scenario.RepoRoot(t), "mapping", "testdata")
	reads := map[string]*registryTopic{
		"json_schema":        newRegistryTopic(t, "oracle-alerts", "json_schema"),
		"protobuf":           newRegistryTopic(t, "oracle-protos", "protobuf"),
		"avro_nested":        newRegistryTopic(t, "oracle-trips", "avro"),
		"json_schema_nested": newRegistryTopic(t, "oracle-trips-json", "json_schema"),
	}
	args := map[string][]string{
		"json_schema": {"jsonschemaproduce.py", "--schema", filepath.Join(testdata, "alert.schema.json")},
		"protobuf": {"protoproduce.py", "--root", filepath.Join(testdata, "proto"), "--proto", "deltaflow/test/reading.proto",
			"--message", "deltaflow.test.Reading"},
		"avro_nested":        {"avroproduce.py", "--schema", tripSchema(t)},
		"json_schema_nested": {"jsonschemaproduce.py", "--schema", tripJSONSchema(t)},
	}
	for name, rt := range reads {
		rt.uri = filepath.Join(t.TempDir(), name) // Spark reads a local table
		rows := rt.produce(args[name][0], 7, 0, args[name][1:]...)
		rt.run()
		rt.want = sparkRows(t, rt.uri, rows)
	}
	reads["avro_evolved"] = avroNestedEvolution(t)
	proto := newProtoFileTopic(t, filepath.Join(t.TempDir(), "proto_file"))
	proto.want = sparkRows(t, proto.uri, proto.want)
	reads["proto_file"] = proto
	codes := newProtoMapKeysTopic(t, filepath.Join(t.TempDir(), "proto_map_keys"))
	codes.want = sparkRows(t, codes.uri, codes.want)
	reads["proto_map_keys"] = codes
	return reads
}

// localTimesTopic is a JSON topic of local date-times, {"i": n, "t": v},
// and the local table deltaflow made of it: columns i long and t
// timestamp_ntz, mode permissive.
type localTimesTopic struct {
	*formatTopic
	values []string // v of record i, as JSON
}

// newLocalTimesTopic produces localTimes to a new topic and runs
// deltaflow on it into a local table (Spark reads it).
func newLocalTimesTopic(t *testing.T) *localTimesTopic {
	t.Helper()
	f := newFormatTopic(t, "oracle-local-times", "  mode: permissive\n  partition_columns: []\n  columns:\n"+
		"    - name: i\n      type: long\n      nullable: false\n    - name: t\n      type: timestamp_ntz\n")
	f.uri = filepath.Join(t.TempDir(), "local_times")
	l := &localTimesTopic{formatTopic: f, values: localTimes()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(l.values))
	for i, v := range l.values {
		recs[i] = &kgo.Record{Topic: f.topic, Value: []byte(`{"i": ` + strconv.Itoa(i) + `, "t": ` + v + `}`)}
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out, err := f.run()
	if err != nil || !bytes.Contains(out, []byte(fmt.Sprintf("rows=%d ", len(recs)))) {
		t.Fatalf("run --until-latest: %v; want %d rows\n%s", err, len(recs), out)
	}
	return l
}

// check compares what Spark found (from_json's types and rows, the
// table's, and the rows only one holds) and reads the table with delta-rs
// and DuckDB, which must find from_json's values.
func (l *localTimesTopic) check(oracleTypes, tableTypes map[string]string, oracle []map[string]any, tableRows int, missing, extra []map[string]any) {
	t := l.t
	t.Helper()
	want := map[string]string{"i": "bigint", "t": "timestamp_ntz"}
	if !maps.Equal(oracleTypes, want) || !maps.Equal(tableTypes, want) {
		t.Errorf("types: from_json %v, the table %v; want %v", oracleTypes, tableTypes, want)
	}
	if len(oracle) != len(l.values) || tableRows != len(l.values) || len(missing) > 0 || len(extra) > 0 {
		t.Errorf("from_json decodes %d rows, the table holds %d (want %d each); missing from the table %v, extra %v",
			len(oracle), tableRows, len(l.values), missing, extra)
	}
	nulls := 0
	for _, r := range oracle {
		if r["t"] == nil {
			nulls++
		}
	}
	if nulls == 0 || nulls == len(oracle) {
		t.Errorf("from_json makes %d of %d values null: the cases test nothing", nulls, len(oracle))
	}
	types, raw := readTable(t, storage.S3Config{}, l.uri)
	if len(types) != 2 || types["t"] != "timestamp_ntz null" {
		t.Errorf("delta-rs reads the column types %v, want t timestamp_ntz", types)
	}
	var rows []map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	key := func(rows []map[string]any) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = fmt.Sprintf("%v %v", r["i"], r["t"])
		}
		slices.Sort(out)
		return out
	}
	if g, w := key(rows), key(oracle); !slices.Equal(g, w) {
		var only []string
		for _, r := range g {
			if !slices.Contains(w, r) {
				only = append(only, "table "+r)
			}
		}
		for _, r := range w {
			if !slices.Contains(g, r) {
				only = append(only, "from_json "+r)
			}
		}
		t.Errorf("delta-rs reads other values than from_json gives (%d rows, %d): %.2000v", len(g), len(w), only)
	}
	store, err := storage.NewLocal(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := delta.NewTable(store).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p := snap.Protocol(); p.MinReaderVersion != 3 || p.MinWriterVersion != 7 || !slices.Contains(p.ReaderFeatures, "timestampNtz") ||
		!slices.Contains(p.WriterFeatures, "timestampNtz") {
		t.Errorf("protocol %+v, want reader 3 / writer 7 with timestampNtz among its reader and writer features", p)
	}
	t.Logf("timestamp_ntz from JSON: %d values, %d null in from_json and the table", len(oracle), nulls)
}

// localTimes are the JSON values of the local date-time topic: the forms
// whose from_json values TestParseTimestampNTZ (mapping) pins (years
// outside 0001–9999 left out: from_json has them, deltaflow refuses
// them), values that are no strings, and random date-times of every
// shape: 1 to 7 fields, padded or not, 'T' or ' ', fractions of 0 to 12
// digits, 5- and 6-digit and signed years, fields out of range, a zone
// or offset now and then, whitespace around.
func localTimes() []string {
	fixed := []string{"2026-06-22T10:15:30", "2026-06-22 10:15:30.123456", "2026-06-22", "2026-06", "2026", "2026-06-22T10:15",
		"2026-06-22T10", "2026-06-22T", "2026-06-22 ", " 2026-06-22T10:15:30 ", "\t2026-06-22T10:15:30\n", "2026-06-22T10:15:30.",
		"2026-06-22T10:15:30.1", "2026-06-22T10:15:30.123456789", "2026-06-22T10:15:30.1234567891234", "2026-06-22T10:15:30Z",
		"2026-06-22T10:15:30+02:00", "2026-06-22T10:15:30.5-05:00", "2026-06-22T10:15:30 UTC", "2026-6-2 1:2:3", "2026-13-01",
		"2026-02-29", "2024-02-29T23:59:59", "2026-06-22T24:00:00", "2026-06-22T23:59:60", "0001-01-01T00:00:00",
		"9999-12-31T23:59:59.999999", "+2026-06-22", "02026-06-22", "10:15:30", "T10:15:30", "", " ", "abc", "20260622",
		"2026-06-22T10:15:30,5", "2026-06-22  10:15:30", "2026-06-22T10:15:30\u00a0", "2026-06-22T10:15:3", "2026-06-22T10:15:"}
	var out []string
	for _, s := range fixed {
		b, _ := json.Marshal(s)
		out = append(out, string(b))
	}
	out = append(out, "1750000000", "-1", "1.5", "true", "null", `{"at": "2026-06-22"}`, `["2026-06-22"]`)
	rng := rand.New(rand.NewPCG(27, 1))
	pad := func(n, width int) string {
		s := strconv.Itoa(n)
		if rng.IntN(4) > 0 {
			s = strings.Repeat("0", max(0, width-len(s))) + s
		}
		return s
	}
	for range 400 {
		var b strings.Builder
		switch rng.IntN(10) {
		case 0:
			b.WriteString("+")
		case 1:
			b.WriteString("0")
		case 2:
			b.WriteString("00")
		}
		b.WriteString(strconv.Itoa(1000 + rng.IntN(9000)))
		fields := 1 + rng.IntN(7)
		for f := 1; f < fields; f++ {
			switch f {
			case 1:
				b.WriteString("-" + pad(1+rng.IntN(13), 2)) // month 13 now and then
			case 2:
				b.WriteString("-" + pad(1+rng.IntN(31), 2)) // and days past the month's
			case 3:
				b.WriteString([]string{"T", " "}[rng.IntN(2)] + pad(rng.IntN(25), 2))
			case 4, 5:
				b.WriteString(":" + pad(rng.IntN(61), 2))
			case 6:
				b.WriteString(".")
				for range rng.IntN(13) {
					b.WriteByte(byte('0' + rng.IntN(10)))
				}
			}
		}
		if rng.IntN(8) == 0 {
			b.WriteString([]string{"Z", "+02:00", "-05:30", " UTC", "x"}[rng.IntN(5)])
		}
		s := b.String()
		if rng.IntN(10) == 0 {
			s = " " + s + "\t"
		}
		j, _ := json.Marshal(s)
		out = append(out, string(j))
	}
	return out
}
