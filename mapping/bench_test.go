package mapping

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

// sensorMix is a realistic mix of the records of docs/design.md: smart plugs and
// door sensors in equal parts, with varied ids, values and times.
func sensorMix(n int) []*Record {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 6, 22, 9, 15, 30, 0, time.UTC)
	recs := make([]*Record, n)
	for i := range recs {
		at := base.Add(time.Duration(rng.Int64N(int64(48 * time.Hour)))).Format("2006-01-02T15:04:05.000000+00:00")
		var v string
		if i%2 == 0 {
			id := fmt.Sprintf("smart-plug-%02d", rng.IntN(20))
			v = fmt.Sprintf(`{"device_id":%q,"device_type":"smart_plug","ingested_at":%q,"payload":"{\"power\": %.1f, \"voltage\": %.1f, \"current\": %.2f, \"energy\": %.1f, \"state\": \"%s\", \"linkquality\": %d}"}`,
				id, at, rng.Float64()*2000, 220+rng.Float64()*20, rng.Float64()*10, rng.Float64()*100, []string{"ON", "OFF"}[rng.IntN(2)], rng.IntN(256))
		} else {
			id := fmt.Sprintf("door-sensor-%02d", rng.IntN(20))
			v = fmt.Sprintf(`{"device_id":%q,"device_type":"door_window","ingested_at":%q,"payload":"{\"contact\": %t, \"battery\": %d, \"linkquality\": %d}"}`,
				id, at, rng.IntN(2) == 0, rng.IntN(101), rng.IntN(256))
		}
		recs[i] = &Record{Topic: "sensor-events", Partition: int32(i % 4), Offset: int64(i), Timestamp: base, Key: []byte(id(v)), Value: []byte(v)}
	}
	return recs
}

func id(v string) string { return v[14:27] }

// reportRate reports records per wall second and per CPU second of the
// process: the machine is shared, and CPU time shows what one core does
// when the benchmark is descheduled by other load.
func reportRate(b *testing.B, cpuStart time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/(cpuTime()-cpuStart).Seconds(), "records/cpu-s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkMapSensor(b *testing.B) { benchMap(b, newDefault(b, Strict), sensorMix(4096)) }

// BenchmarkMapJSONNested maps a record with struct, array and map
// columns (nestedJSONConfig): the walk of each, its leaves encoded and
// copied into the arena.
func BenchmarkMapJSONNested(b *testing.B) {
	m, err := New(nestedJSONConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	benchMap(b, m, []*Record{{Value: []byte(nestedRecord)}})
}

// benchMap maps recs with m over and over, as a reader does (the arena
// reset at each flush), and reports records per second.
func benchMap(b *testing.B, m *Mapper, recs []*Record) {
	var row Row
	row.Arena = new(Arena)
	bytes := 0
	for _, r := range recs {
		bytes += len(r.Value)
	}
	b.SetBytes(int64(bytes / len(recs)))
	b.ReportAllocs()
	i := 0
	cpu := cpuTime()
	for b.Loop() {
		if err := m.Map(recs[i], &row); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(recs) {
			i = 0
			row.Arena.Reset() // a buffer flush
		}
	}
	reportRate(b, cpu)
}

// BenchmarkFastjsonBaseline is the floor Map builds on: parsing the
// envelope and its payload string with fastjson, nothing else.
func BenchmarkFastjsonBaseline(b *testing.B) {
	recs := sensorMix(4096)
	var outer, inner fastjson.Parser
	b.ReportAllocs()
	i := 0
	cpu := cpuTime()
	for b.Loop() {
		v, err := outer.ParseBytes(recs[i].Value)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inner.ParseBytes(v.GetStringBytes("payload")); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(recs) {
			i = 0
		}
	}
	reportRate(b, cpu)
}

// BenchmarkMapDebeziumAvro maps the real change events re-encoded in Avro
// (debeziumAvroBench) through the registry path: snapshot reads,
// creates, updates and deletes, decimals and ZonedTimestamps.
func BenchmarkMapDebeziumAvro(b *testing.B) {
	m, recs := debeziumAvroBench(b)
	events := recs[:0]
	for _, r := range recs {
		if r.Value != nil { // a tombstone is skipped before any decoding
			events = append(events, r)
		}
	}
	benchMap(b, m, events)
}

// BenchmarkMapDebeziumJSON maps the same events as they were captured,
// through the JSON converter with schemas.enable, for comparison.
func BenchmarkMapDebeziumJSON(b *testing.B) {
	m, err := New(Config{Tombstones: true, CDC: CDCDebezium, Columns: debeziumAvroColumns}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var events []*Record
	for i, s := range debeziumSamples(b, debeziumEventsFile) {
		if s.Value != nil {
			events = append(events, &Record{Value: s.Value, Offset: int64(i)})
		}
	}
	benchMap(b, m, events)
}
