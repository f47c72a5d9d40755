package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/delta/filter"
)

// catStats counts what cat read and what pruning and skipping saved.
type catStats struct {
	files, pruned, skipped, read int
	rowsRead, rowsOut            int64
}

// catFlags are cat's flags.
type catFlags struct {
	tableFlags
	timestamp, where, columns, format string
	limit                             int64
	stats, asJSON                     bool
}

func catCommand(out IO) *cobra.Command {
	var f catFlags
	cmd := &cobra.Command{
		Use:   "cat",
		Short: "print a table's rows (filtered, projected, time travel)",
		Example: `  deltaflow cat --table ./data/sensor_events --limit 5
  deltaflow cat --table ./data/sensor_events --where "device_type = 'smart_plug' AND power > 100" --columns device_id,event_time,power
  deltaflow cat --table ./data/sensor_events --version 1 --format csv --limit 10 --stats`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCat(cmd.Context(), out, &f) },
	}
	fs := cmd.Flags()
	f.tableFlags.register(fs)
	f.registerVersion(fs)
	fs.StringVar(&f.timestamp, "timestamp", "", "read the table as of this `time` (RFC 3339, 'YYYY-MM-DD HH:MM:SS' UTC, or a date)")
	fs.StringVar(&f.where, "where", "", "keep rows matching this `filter`, e.g. \"device_type = 'smart_plug' AND power > 100\"")
	fs.StringVar(&f.columns, "columns", "", "print only these comma-separated `columns`, in this order (default: all)")
	atLeast(fs, &f.limit, "limit", 0, 0, "stop after this many rows (0: all)")
	fs.StringVar(&f.format, "format", "jsonl", "output `format`: jsonl (one JSON object per row) or csv")
	fs.BoolVar(&f.asJSON, "json", false, "same as --format jsonl")
	fs.BoolVar(&f.stats, "stats", false, "report files pruned by partition, skipped by statistics and read, on stderr")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"jsonl", "csv"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runCat(ctx context.Context, out IO, f *catFlags) error {
	if f.format != "jsonl" && f.format != "csv" {
		return usagef("--format %q: want jsonl or csv", f.format)
	}
	if f.asJSON && f.format != "jsonl" {
		return usagef("--json and --format %s exclude each other", f.format)
	}
	if f.timestamp != "" && f.version >= 0 {
		return usagef("--version and --timestamp exclude each other")
	}
	var (
		tbl  *delta.Table
		snap *delta.Snapshot
		err  error
	)
	if f.timestamp != "" {
		ts, perr := parseTimeFlag(f.timestamp)
		if perr != nil {
			return usagef("--timestamp: %v", perr)
		}
		if tbl, err = f.open(ctx); err != nil {
			return err
		}
		if snap, err = tbl.SnapshotAtTime(ctx, ts); err != nil {
			return fmt.Errorf("read table %s as of %s: %w", f.uri, ts.Format(time.RFC3339Nano), err)
		}
	} else if tbl, snap, err = f.snapshot(ctx); err != nil {
		return err
	}
	if err := snap.CheckRead(); err != nil {
		return err
	}
	schema, err := snap.Schema()
	if err != nil {
		return err
	}
	var b *filter.Bound
	if f.where != "" {
		if b, err = bindFilter(snap, f.where); err != nil {
			return err
		}
	}
	proj, err := projection(schema, f.columns)
	if err != nil {
		return err
	}

	bw := bufio.NewWriter(out.Stdout)
	w := newRowWriter(bw, f.format, schema, proj)
	var st catStats
	err = catRows(ctx, tbl, snap, schema, b, f.limit, &st, w.write)
	if ferr := w.flush(); err == nil {
		err = ferr
	}
	if f.stats {
		fmt.Fprintf(out.Stderr, "files: %d in snapshot %d, %d pruned by partition, %d skipped by statistics, %d read; rows: %d read, %d printed\n",
			st.files, snap.Version(), st.pruned, st.skipped, st.read, st.rowsRead, st.rowsOut)
	}
	return err
}

// catRows streams the matching rows of the snapshot to emit: files are
// pruned by partition values, then skipped by statistics, and only the
// rest are read and filtered row by row.
func catRows(ctx context.Context, tbl *delta.Table, snap *delta.Snapshot, schema *delta.StructType, b *filter.Bound,
	limit int64, st *catStats, emit func(delta.Row) error) error {
	files := snap.Files()
	st.files = len(files)
	for _, a := range files {
		if b != nil {
			ok, err := b.MatchPartition(snap.PartitionValues(a))
			if err != nil {
				return fmt.Errorf("file %s: %w", a.Path, err)
			}
			if !ok {
				st.pruned++
				continue
			}
			if a.Stats != "" {
				// Unreadable stats just mean no skipping.
				if s, err := snap.FileStats(a); err == nil && !b.MayMatch(s) {
					st.skipped++
					continue
				}
			}
		}
		st.read++
		for row, err := range delta.DataFileRows(ctx, tbl.Store(), schema, snap.PartitionColumns(), a) {
			if err != nil {
				return err
			}
			st.rowsRead++
			if b != nil && !b.Match(row) {
				continue
			}
			if err := emit(row); err != nil {
				return err
			}
			if st.rowsOut++; limit > 0 && st.rowsOut >= limit {
				return nil
			}
		}
	}
	return nil
}

// projection returns the schema indexes of the --columns list (all when
// empty).
func projection(schema *delta.StructType, columns string) ([]int, error) {
	if columns == "" {
		idx := make([]int, len(schema.Fields))
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	var idx []int
	for _, name := range strings.Split(columns, ",") {
		name = strings.TrimSpace(name)
		i := schema.Index(name)
		if i < 0 {
			return nil, usagef("--columns: no column %q", name)
		}
		idx = append(idx, i)
	}
	return idx, nil
}

// parseTimeFlag reads --timestamp: RFC 3339, or a zone-less form as UTC.
func parseTimeFlag(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2024-06-01T12:00:00Z), '2024-06-01 12:00:00' (UTC) or a date", s)
}

// rowWriter renders rows as JSON lines or CSV with a header.
type rowWriter struct {
	w      *bufio.Writer
	csv    *csv.Writer
	schema *delta.StructType
	proj   []int
	keys   [][]byte // JSON-encoded column names
	rec    []string
}

func newRowWriter(w *bufio.Writer, format string, schema *delta.StructType, proj []int) *rowWriter {
	rw := &rowWriter{w: w, schema: schema, proj: proj}
	if format == "csv" {
		rw.csv = csv.NewWriter(w)
		header := make([]string, len(proj))
		for i, j := range proj {
			header[i] = schema.Fields[j].Name
		}
		_ = rw.csv.Write(header)
		rw.rec = make([]string, len(proj))
		return rw
	}
	for _, j := range proj {
		k, _ := json.Marshal(schema.Fields[j].Name)
		rw.keys = append(rw.keys, k)
	}
	return rw
}

func (rw *rowWriter) write(row delta.Row) error {
	if rw.csv != nil {
		for i, j := range rw.proj {
			rw.rec[i] = csvValue(rw.schema.Fields[j].Type, row[j])
		}
		return rw.csv.Write(rw.rec)
	}
	buf := []byte{'{'}
	for i, j := range rw.proj {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, rw.keys[i]...)
		buf = append(buf, ':')
		v, err := jsonValue(rw.schema.Fields[j].Type, row[j])
		if err != nil {
			return fmt.Errorf("column %s: %w", rw.schema.Fields[j].Name, err)
		}
		buf = append(buf, v...)
	}
	buf = append(buf, '}', '\n')
	_, err := rw.w.Write(buf)
	return err
}

func (rw *rowWriter) flush() error {
	if rw.csv != nil {
		rw.csv.Flush()
		if err := rw.csv.Error(); err != nil {
			return err
		}
	}
	return rw.w.Flush()
}

// formatTimeValue renders dates as YYYY-MM-DD, timestamps as RFC 3339 in
// UTC and timestamp_ntz without a zone.
func formatTimeValue(t delta.DataType, v time.Time) string {
	switch t {
	case delta.Date:
		return v.UTC().Format(time.DateOnly)
	case delta.TimestampNTZ:
		return v.UTC().Format("2006-01-02T15:04:05.999999999")
	}
	return v.UTC().Format(time.RFC3339Nano)
}

func jsonValue(t delta.DataType, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return []byte("null"), nil
	case time.Time:
		return json.Marshal(formatTimeValue(t, x))
	case float32:
		return jsonFloat(float64(x), 32)
	case float64:
		return jsonFloat(x, 64)
	case string:
		if _, ok := t.(delta.DecimalType); ok {
			return []byte(x), nil // a decimal's text is a JSON number; keeps its scale
		}
	case delta.VariantValue:
		return x.AppendJSON(nil) // the JSON itself, as Spark's to_json renders it
	}
	return json.Marshal(v)
}

// jsonFloat writes NaN and ±Inf, which JSON lacks, as strings.
func jsonFloat(f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return json.Marshal(strconv.FormatFloat(f, 'g', -1, bits))
	}
	return strconv.AppendFloat(nil, f, 'g', -1, bits), nil
}

func csvValue(t delta.DataType, v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case time.Time:
		return formatTimeValue(t, x)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool, int64, int32, int16, int8:
		return fmt.Sprint(x)
	case delta.VariantValue:
		return x.String()
	}
	b, err := json.Marshal(v) // nested values
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
