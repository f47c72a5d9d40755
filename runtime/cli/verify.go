package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/delta/filter"
	"github.com/deltaflow/deltaflow/storage"
)

// verifyJSON is `verify --json`.
type verifyJSON struct {
	Version int64 `json:"version"`
	OK      bool  `json:"ok"`
	Deep    bool  `json:"deep"`
	Files   int   `json:"files"`
	// Rows is counted in the files with --deep, else taken from the stats.
	Rows     int64         `json:"rows"`
	Failures []failureJSON `json:"failures"`
}

// failureJSON is one way a file differs from the log.
type failureJSON struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

func verifyCommand(out IO) *cobra.Command {
	var tf tableFlags
	var deep, asJSON bool
	cmd := &cobra.Command{
		Use:     "verify",
		Short:   "check that every live file exists with its logged size (and, --deep, its stats)",
		Example: `  deltaflow verify --table ./data/sensor_events --deep`,
		Args:    noArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runVerify(cmd.Context(), out, &tf, deep, asJSON) },
	}
	tf.register(cmd.Flags())
	tf.registerVersion(cmd.Flags())
	cmd.Flags().BoolVar(&deep, "deep", false, "also read every file: row count, and column min/max/nullCount against the stats")
	jsonFlag(cmd.Flags(), &asJSON)
	return cmd
}

func runVerify(ctx context.Context, out IO, tf *tableFlags, deep, asJSON bool) error {
	tbl, snap, err := tf.snapshot(ctx)
	if err != nil {
		return err
	}
	schema, err := snap.Schema()
	if err != nil {
		return err
	}
	files := snap.Files()
	res := verifyJSON{Version: snap.Version(), Deep: deep, Files: len(files), Failures: []failureJSON{}}
	bad := 0
	for _, a := range files {
		problems, n, err := verifyFile(ctx, tbl.Store(), snap, schema, a, deep)
		if err != nil {
			return err
		}
		res.Rows += n
		if len(problems) > 0 {
			bad++
		}
		for _, p := range problems {
			res.Failures = append(res.Failures, failureJSON{Path: a.Path, Problem: p})
			if !asJSON {
				fmt.Fprintf(out.Stdout, "FAIL %s: %s\n", a.Path, p)
			}
		}
	}
	res.OK = bad == 0
	if asJSON {
		if err := writeJSON(out.Stdout, res); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("verify failed: %d of %d files at version %d differ from the log", bad, len(files), snap.Version())
	}
	if !asJSON {
		what := "rows (from stats)"
		if deep {
			what = "rows verified"
		}
		fmt.Fprintf(out.Stdout, "OK: %d files, %d %s at version %d\n", len(files), res.Rows, what, snap.Version())
	}
	return nil
}

// verifyFile checks one live file and returns what differs from its add
// action, and its row count (read with deep, else from the stats). Only
// storage failures other than a missing file are errors.
func verifyFile(ctx context.Context, store storage.Store, snap *delta.Snapshot, schema *delta.StructType, a *delta.Add, deep bool) ([]string, int64, error) {
	partitionColumns := snap.PartitionColumns()
	var st *delta.Stats
	if a.Stats != "" {
		var err error
		if st, err = snap.FileStats(a); err != nil {
			return []string{fmt.Sprintf("stats unreadable: %v", err)}, 0, nil
		}
	}
	key, err := delta.StoreKey(store, a.Path)
	if err != nil {
		return []string{fmt.Sprintf("bad path: %v", err)}, 0, nil
	}
	info, err := store.Stat(ctx, key)
	if errors.Is(err, storage.ErrNotExist) {
		return []string{"missing from storage"}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stat %s: %w", key, err)
	}
	if info.Size != a.Size {
		return []string{fmt.Sprintf("size: log says %d bytes, storage has %d", a.Size, info.Size)}, 0, nil
	}
	// The deletion vector must be there and intact (size, checksum,
	// cardinality), or readers fail or return deleted rows.
	if _, err := delta.LoadDeletionVector(ctx, store, a.DeletionVector); err != nil {
		return []string{fmt.Sprintf("deletion vector: %v", err)}, 0, nil
	}
	if !deep {
		if n, ok := a.NumLogicalRecords(); ok && n > 0 {
			return nil, n, nil
		}
		return nil, 0, nil
	}
	cols := newColumnChecks(schema, partitionColumns)
	var n int64
	for row, err := range delta.DataFileRows(ctx, store, schema, partitionColumns, a) {
		if err != nil {
			return []string{fmt.Sprintf("unreadable: %v", err)}, n, nil
		}
		n++
		for i := range cols {
			cols[i].add(row[cols[i].idx])
		}
	}
	if st == nil {
		return nil, n, nil
	}
	var problems []string
	if want, ok := a.NumLogicalRecords(); ok && want != n {
		dv := ""
		if a.DeletionVector != nil {
			dv = fmt.Sprintf(" (%d after the deletion vector)", want)
		}
		problems = append(problems, fmt.Sprintf("numRecords: stats say %d%s, file has %d rows", st.NumRecords, dv, n))
	}
	if a.DeletionVector != nil {
		// Stats describe the physical rows; with deleted rows only the
		// bounds still hold (as wide bounds), not the null counts.
		st.NullCount = nil
	}
	for i := range cols {
		problems = append(problems, cols[i].check(st)...)
	}
	return problems, n, nil
}

// columnCheck accumulates one top-level column's actual min, max and nulls.
type columnCheck struct {
	name     string
	idx      int
	typ      delta.DataType
	min, max any
	nulls    int64
}

func newColumnChecks(schema *delta.StructType, partitionColumns []string) []columnCheck {
	var cols []columnCheck
	for i, f := range schema.Fields {
		if !slices.Contains(partitionColumns, f.Name) {
			cols = append(cols, columnCheck{name: f.Name, idx: i, typ: f.Type})
		}
	}
	return cols
}

func (c *columnCheck) add(v any) {
	if v == nil {
		c.nulls++
		return
	}
	if c.min == nil {
		c.min, c.max = v, v
		return
	}
	if r, ok := filter.Compare(c.typ, v, c.min); ok && r < 0 {
		c.min = v
	}
	if r, ok := filter.Compare(c.typ, v, c.max); ok && r > 0 {
		c.max = v
	}
}

// check compares the stats with the data, allowing for how writers
// truncate: a min is at most the actual min (strings are cut prefixes,
// timestamps floored to ms); a max is at least the actual max once that is
// cut the same way (a timestamp floored to ms, a string to 32 characters).
func (c *columnCheck) check(st *delta.Stats) []string {
	var problems []string
	if want, ok := st.NullCount[c.name]; ok && want != c.nulls {
		problems = append(problems, fmt.Sprintf("nullCount.%s: stats say %d, file has %d", c.name, want, c.nulls))
	}
	for _, bound := range []struct {
		label  string
		raw    any
		actual any
		isMax  bool
	}{{"minValues", st.MinValues[c.name], c.min, false}, {"maxValues", st.MaxValues[c.name], c.max, true}} {
		if bound.raw == nil {
			continue // writers may leave bounds out
		}
		stat, err := delta.StatValue(c.typ, bound.raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s.%s: %v", bound.label, c.name, err))
			continue
		}
		if bound.actual == nil {
			problems = append(problems, fmt.Sprintf("%s.%s: stats say %v, but the column is all null", bound.label, c.name, bound.raw))
			continue
		}
		actual := truncateLikeStats(c.typ, bound.actual)
		r, ok := filter.Compare(c.typ, stat, actual)
		if !ok {
			continue
		}
		if !bound.isMax && r > 0 {
			problems = append(problems, fmt.Sprintf("%s.%s: stats say %v, above the actual min %v", bound.label, c.name, bound.raw, bound.actual))
		}
		if bound.isMax && r < 0 {
			problems = append(problems, fmt.Sprintf("%s.%s: stats say %v, below the actual max %v", bound.label, c.name, bound.raw, bound.actual))
		}
	}
	return problems
}

// truncateLikeStats cuts an actual value as stats writers do before
// comparing it with a bound: timestamps floored to ms, strings to their
// first delta.StatsStringPrefix characters.
func truncateLikeStats(t delta.DataType, v any) any {
	switch x := v.(type) {
	case time.Time:
		if t == delta.Timestamp || t == delta.TimestampNTZ {
			return x.Truncate(time.Millisecond)
		}
	case string:
		if t == delta.String && utf8.RuneCountInString(x) > delta.StatsStringPrefix {
			return delta.TruncateMinString(x, delta.StatsStringPrefix)
		}
	}
	return v
}
