package delta

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// sensorSchema is the deltaflow default table (sensor_events).
func sensorSchema() (*StructType, []string) {
	f := func(name string, t DataType) StructField { return StructField{Name: name, Type: t, Nullable: true} }
	return &StructType{Fields: []StructField{
		f("device_id", String), f("device_type", String), f("event_time", Timestamp), f("linkquality", Integer),
		f("contact", Boolean), f("battery", Integer), f("power", Double), f("voltage", Double),
		f("current", Double), f("energy", Double), f("plug_state", String), f("raw_payload", String),
		f("processed_at", Timestamp), f("event_date", Date),
	}}, []string{"device_type", "event_date"}
}

// sensorRows prebuilds n parquet rows of the sensor data schema (plugs and
// door sensors alternating, so half the optional columns are null).
func sensorRows(ps *ParquetSchema, n int) []parquet.Row {
	rows := make([]parquet.Row, n)
	ids := []string{"smart-plug-01", "door-sensor-01", "smart-plug-02", "door-sensor-02"}
	payloads := make([]string, n)
	t0 := time.Date(2026, 6, 22, 9, 15, 30, 123456000, time.UTC).UnixMicro()
	for i := range rows {
		us := t0 + int64(i)*1000
		// data columns: device_id, event_time, linkquality, contact, battery,
		// power, voltage, current, energy, plug_state, raw_payload, processed_at
		r := parquet.Row{ps.Text(0, ids[i%4]), ps.Int64(1, us), ps.Int32(2, int32(100+i%150))}
		if i%2 == 0 {
			payloads[i] = fmt.Sprintf(`{"power": %d.3, "voltage": 230.1, "current": 0.37, "energy": 12.4, "state": "ON", "linkquality": 248}`, i%100)
			r = append(r, ps.Null(3), ps.Null(4), ps.Float64(5, float64(i%100)+0.3), ps.Float64(6, 230.1),
				ps.Float64(7, 0.37), ps.Float64(8, 12.4+float64(i)/1000), ps.Text(9, "ON"))
		} else {
			payloads[i] = fmt.Sprintf(`{"contact": false, "battery": %d, "linkquality": 159}`, i%100)
			r = append(r, ps.Bool(3, i%3 == 0), ps.Int32(4, int32(i%100)), ps.Null(5), ps.Null(6),
				ps.Null(7), ps.Null(8), ps.Null(9))
		}
		r = append(r, ps.Text(10, payloads[i]), ps.Int64(11, us+5000))
		rows[i] = r
	}
	return rows
}

func benchmarkSensorEncode(b *testing.B, c Compression) {
	table, parts := sensorSchema()
	data := schema.DataSchema(table, parts)
	w0, err := NewFileWriter(io.Discard, data, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rows := sensorRows(w0.Schema(), 4096)
	const batch = 1024
	b.ReportAllocs()
	var size int64
	var nrows int64
	b.ResetTimer()
	// Each iteration writes one row; files of 256 Ki rows (4 row groups)
	// are closed and a new one started, as the engine does per flush.
	for i := 0; i < b.N; {
		w, err := NewFileWriter(io.Discard, data, WriterOptions{Compression: c})
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < 256*1024 && i < b.N; {
			n := min(batch, b.N-i, 256*1024-j)
			off := i % len(rows)
			n = min(n, len(rows)-off)
			if _, err := w.WriteRows(rows[off : off+n]); err != nil {
				b.Fatal(err)
			}
			i += n
			j += n
		}
		st, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size
		nrows += st.NumRecords
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(size)/float64(nrows), "B/row")
}

func BenchmarkSensorEncodeSnappy(b *testing.B) { benchmarkSensorEncode(b, Snappy) }
func BenchmarkSensorEncodeZstd(b *testing.B)   { benchmarkSensorEncode(b, Zstd) }
