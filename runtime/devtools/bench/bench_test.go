package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// childEnv marks a re-executed test binary as a stage child.
const childEnv = "DELTAFLOW_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(StageMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchShort runs the three throughput stages on 100,000 events, each
// in a child process (this test binary re-executed), then the same events
// over three tables (--tables 3), and checks the JSON. It checks that the
// bench works and its numbers are sane, not the targets.
func TestBenchShort(t *testing.T) {
	dir := t.TempDir()
	jsonPath, pngPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.png")
	var out strings.Builder
	_, err := Run(t.Context(), Options{
		Events: 100_000, Throughput: true, Tables: 3, TablesIdle: 2 * time.Second, Upsert: true, UpsertKeys: 50_000,
		Dir: dir, Output: jsonPath, PNG: pngPath,
		Self: []string{os.Args[0]}, ChildEnv: []string{childEnv + "=1"}, Out: &out, Log: testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"events", "consume_eps", "decode_eps", "e2e_eps", "e2e_peak_rss_bytes", "e2e_cpu_seconds",
		"first_commit_seconds", "commits", "files", "rows_committed", "stages"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Events != 100_000 || r.InputBytes <= 0 {
		t.Errorf("events %d, input bytes %d", r.Events, r.InputBytes)
	}
	if r.ConsumeEPS <= 0 || r.DecodeEPS <= 0 || r.E2EEPS <= 0 {
		t.Errorf("eps: consume %v, decode %v, e2e %v", r.ConsumeEPS, r.DecodeEPS, r.E2EEPS)
	}
	if r.Commits < 1 || r.Files < r.Commits || r.RowsCommitted != r.Events {
		t.Errorf("commits %d, files %d, rows committed %d of %d events", r.Commits, r.Files, r.RowsCommitted, r.Events)
	}
	if r.FirstCommitSeconds <= 0 || r.E2ECPUSeconds <= 0 || r.E2EPeakRSSBytes < 1<<20 {
		t.Errorf("first commit %v s, e2e CPU %v s, peak RSS %d", r.FirstCommitSeconds, r.E2ECPUSeconds, r.E2EPeakRSSBytes)
	}
	if len(r.Stages) != 3 {
		t.Fatalf("%d stages", len(r.Stages))
	}
	for _, s := range r.Stages {
		if s.Events != r.Events || s.Seconds <= 0 || s.CPUSeconds <= 0 || s.PeakRSSBytes <= 0 || len(s.Series) == 0 {
			t.Errorf("stage %s: events %d, %v s, CPU %v s, peak RSS %d, %d samples", s.Name, s.Events, s.Seconds, s.CPUSeconds, s.PeakRSSBytes, len(s.Series))
		}
		if s.DeadLetters != 0 {
			t.Errorf("stage %s: %d dead letters from clean records", s.Name, s.DeadLetters)
		}
	}
	if st, err := os.Stat(pngPath); err != nil || st.Size() < 1000 {
		t.Errorf("PNG: %v", err)
	}
	if tr := r.Tables; tr == nil || tr.Tables != 3 || tr.Events != 99_999 || tr.EPS <= 0 || tr.VsOneTable <= 0 || tr.Commits < 3 ||
		len(tr.IdleRSSBytes) != 2 || tr.IdleRSSBytes[0] < 1<<20 || tr.IdleRSSBytes[1] < 1<<20 || tr.IdleWakeups[1] <= 0 {
		t.Errorf("tables report %+v; want 99,999 rows over 3 tables and both idle daemons measured", tr)
	}
	if u := r.Upsert; u == nil || u.Keys != 50_000 || u.Changes != 100_000 || u.LoadEPS <= 0 || u.ChangesPerS <= 0 ||
		u.Commits < 1 || u.PeakRSSBytes < 1<<20 {
		t.Errorf("upsert report %+v; want 50,000 keys loaded and 100,000 changes drained", u)
	}
	lines, err := CheckFiles([]string{jsonPath})
	if err != nil || len(lines) != 8 {
		t.Errorf("check: %v, %q", err, lines)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestBenchSteadyShort runs steady and latency mode briefly (a fast flush so
// rows commit within the test) and checks that every measurement was taken.
func TestBenchSteadyShort(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "steady.json")
	var out strings.Builder
	r, err := Run(t.Context(), Options{
		Steady: []float64{17, 200}, SteadyDuration: 4 * time.Second, SteadyIdle: 2 * time.Second, FlushInterval: time.Second,
		Latency: true, Rate: 200, Duration: 3 * time.Second,
		Dir: dir, Output: jsonPath, Self: []string{os.Args[0]}, ChildEnv: []string{childEnv + "=1"}, Out: &out, Log: testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if l := r.Latency; l == nil || l.Events != 600 || l.Uncommitted != 0 || l.Commits < 1 || l.P50Seconds <= 0 || l.P99Seconds < l.P50Seconds {
		t.Errorf("latency report %+v", l)
	}
	if len(r.Steady) != 2 {
		t.Fatalf("%d steady reports, want 2", len(r.Steady))
	}
	for _, s := range r.Steady {
		if s.Events != int64(s.Rate*4) || s.RowsCommitted != s.Events || s.Commits < 1 || s.Files < 1 {
			t.Errorf("%g/s: events %d, rows committed %d, commits %d, files %d", s.Rate, s.Events, s.RowsCommitted, s.Commits, s.Files)
		}
		if s.CPUPercent <= 0 || s.AvgRSSBytes < 1<<20 || s.PeakRSSBytes < s.AvgRSSBytes || s.NATS != "embedded" {
			t.Errorf("%g/s: CPU %v%%, RSS avg %d peak %d, NATS %q", s.Rate, s.CPUPercent, s.AvgRSSBytes, s.PeakRSSBytes, s.NATS)
		}
		if s.IdleSeconds < 2 || s.IdleWakeupsPerSec <= 0 || s.TableBytes <= 0 || s.TableBytesPerHour <= float64(s.TableBytes) {
			t.Errorf("%g/s: idle %v s, %v wake-ups/s, table %d bytes, %v bytes/hour", s.Rate, s.IdleSeconds, s.IdleWakeupsPerSec, s.TableBytes, s.TableBytesPerHour)
		}
	}
	lines, err := CheckFiles([]string{jsonPath})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(lines, "\n")
	for _, want := range []string{"Pi load CPU < 1%", "Pi load RSS <= 48 MiB", "idle wake-ups <= 50/s"} {
		if !strings.Contains(joined, want) || strings.Contains(joined, "SKIP  "+want) {
			t.Errorf("check lines lack a verdict on %q:\n%s", want, joined)
		}
	}
}

// TestBenchBinaryShort runs the throughput stages with --format avro and
// --format protobuf on 20,000 events: a JSON decode stage, then consume,
// decode and e2e on the same events in the format through the schema
// registry, every record mapped and committed, and the two decode rates
// compared.
func TestBenchBinaryShort(t *testing.T) {
	for _, format := range []string{FormatAvro, FormatProtobuf} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			var out strings.Builder
			r, err := Run(t.Context(), Options{Events: 20_000, Throughput: true, Format: format, Dir: dir,
				Self: []string{os.Args[0]}, ChildEnv: []string{childEnv + "=1"}, Out: &out, Log: testLog{t}})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(out.String())
			names := make([]string, len(r.Stages))
			for i, s := range r.Stages {
				names[i] = s.Name
				if s.Events != r.Events || s.DeadLetters != 0 {
					t.Errorf("stage %s: %d events, %d dead letters", s.Name, s.Events, s.DeadLetters)
				}
			}
			if got := strings.Join(names, ","); got != "decode-json,consume,decode,e2e" {
				t.Errorf("stages %s", got)
			}
			if r.Format != format || r.RowsCommitted != r.Events || r.DecodeJSONEPS <= 0 || r.DecodeVsJSON <= 0 {
				t.Errorf("format %q, rows %d of %d, json decode %v/s, ratio %v", r.Format, r.RowsCommitted, r.Events, r.DecodeJSONEPS, r.DecodeVsJSON)
			}
		})
	}
}
