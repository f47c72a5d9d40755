package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// DefaultTargetFileSize is OPTIMIZE's default target file size.
const DefaultTargetFileSize = 128 << 20

// DefaultMaxDeletedRatio is the share of a file's rows its deletion vector
// may delete before OPTIMIZE rewrites it whatever its size: Spark's
// spark.databricks.delta.optimize.maxDeletedRowsRatio.
const DefaultMaxDeletedRatio = 0.05

// OptimizeOptions configures Optimize.
type OptimizeOptions struct {
	// TargetSize is the size compacted files aim for; files at or above it
	// are left alone. 0 means DefaultTargetFileSize.
	TargetSize int64
	// MaxDeletedRatio: a file whose deletion vector deletes more than this
	// share of its rows is rewritten without them whatever its size, alone
	// if need be (an upsert table's files fill with deleted rows); 0 means
	// DefaultMaxDeletedRatio, above 1 never.
	MaxDeletedRatio float64
	// Filter, if set, limits compaction to partitions it accepts.
	Filter func(partitionValues map[string]*string) bool
	// Predicate describes Filter for the commitInfo (e.g. "device_type = 'x'").
	Predicate string
	// Writer configures the new files; the table's stats settings apply.
	Writer WriterOptions
	// DryRun plans without writing or committing.
	DryRun bool
	// Progress, if set, is called after each bin is written.
	Progress func(done, total int, bytesDone, bytesTotal int64)
}

// OptimizeBin is a group of small files of one partition compacted into one.
type OptimizeBin struct {
	PartitionValues map[string]*string
	Files           []*Add
	Bytes           int64
}

// OptimizeResult reports what Optimize did (or would do).
type OptimizeResult struct {
	Version      int64 // committed version; -1 when nothing was committed
	Bins         []OptimizeBin
	FilesAdded   int
	FilesRemoved int
	BytesAdded   int64
	BytesRemoved int64
}

// PlanOptimize bin-packs the small files of each partition (sorted by size)
// into bins of at most TargetSize bytes; only bins of two or more files are
// worth rewriting, or of a file whose deletion vector deletes more than
// MaxDeletedRatio of its rows (such a file takes part whatever its size,
// as Spark's OPTIMIZE purges it). On clustered tables only unclustered
// files take part. Files with deletion vectors take part: compaction
// rewrites them with the deleted rows left out. Files the table's store
// cannot read (outside the table root, or with a path that cannot be
// decoded) are left alone.
func PlanOptimize(s *Snapshot, opts OptimizeOptions) []OptimizeBin {
	target := opts.TargetSize
	if target <= 0 {
		target = DefaultTargetFileSize
	}
	maxDeleted := opts.MaxDeletedRatio
	if maxDeleted <= 0 {
		maxDeleted = DefaultMaxDeletedRatio
	}
	purged := map[*Add]bool{}
	byPartition := map[string][]*Add{}
	for _, a := range s.files {
		// Partition values are keyed by physical names under column mapping.
		logical := s.logicalPartitionValues(a.PartitionValues)
		// A file a clustering implementation made (clusteringProvider) is
		// left to it: bin-packing it would undo its clustering.
		purge := deletedRatio(a) > maxDeleted
		if a.Size >= target && !purge || a.ClusteringProvider != nil || opts.Filter != nil && !opts.Filter(logical) {
			continue
		}
		purged[a] = purge
		if _, err := s.root.key(a.Path); err != nil {
			continue
		}
		dir := PartitionDir(s.PartitionColumns(), logical)
		byPartition[dir] = append(byPartition[dir], a)
	}
	var bins []OptimizeBin
	for _, dir := range slices.Sorted(maps.Keys(byPartition)) {
		files := byPartition[dir]
		slices.SortFunc(files, func(a, b *Add) int {
			if a.Size != b.Size {
				return int(a.Size - b.Size)
			}
			return compareStrings(a.Path, b.Path)
		})
		var cur OptimizeBin
		flush := func() {
			if len(cur.Files) > 1 || len(cur.Files) == 1 && purged[cur.Files[0]] {
				bins = append(bins, cur)
			}
			cur = OptimizeBin{}
		}
		for _, f := range files {
			if len(cur.Files) > 0 && cur.Bytes+f.Size > target {
				flush()
			}
			cur.PartitionValues = f.PartitionValues
			cur.Files = append(cur.Files, f)
			cur.Bytes += f.Size
		}
		flush()
	}
	return bins
}

// deletedRatio is the share of a's rows its deletion vector deletes (0
// without one, or without a row count in its stats).
func deletedRatio(a *Add) float64 {
	if a.DeletionVector == nil {
		return 0
	}
	st, err := ParseStats(a.Stats)
	if err != nil || st.NumRecords <= 0 {
		return 0
	}
	return float64(a.DeletionVector.Cardinality) / float64(st.NumRecords)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Optimize compacts small files (see PlanOptimize) and commits the rewrite
// as one OPTIMIZE commit: removes and adds with dataChange=false, so
// concurrent appends never conflict with it. If a concurrent commit removed
// one of the compacted files, the commit aborts with a ConflictDelete error;
// the files written for it are then orphans that VACUUM removes.
func (t *Table) Optimize(ctx context.Context, s *Snapshot, opts OptimizeOptions) (*OptimizeResult, error) {
	if err := s.Check(OpOptimize); err != nil {
		return nil, fmt.Errorf("optimize: %w", err)
	}
	bins := PlanOptimize(s, opts)
	res := &OptimizeResult{Version: -1, Bins: bins}
	var total int64
	for _, b := range bins {
		total += b.Bytes
	}
	if opts.DryRun || len(bins) == 0 {
		return res, nil
	}
	schema, err := s.Schema()
	if err != nil {
		return nil, err
	}
	wopts := opts.Writer
	if err := s.ApplyWriterOptions(&wopts); err != nil {
		return nil, fmt.Errorf("optimize: %w", err)
	}
	var preserve *rowTrackingColumns
	if s.preservesRowIDs() {
		if preserve, err = s.materializedRowTrackingColumns(); err != nil {
			return nil, fmt.Errorf("optimize: %w", err)
		}
	}
	now := t.now().UnixMilli()
	var actions []Action
	var sizes []int64
	var done, dvsRemoved int64
	for i, b := range bins {
		add, err := t.compact(ctx, schema, s.PartitionColumns(), b, preserve, wopts)
		if err != nil {
			return nil, fmt.Errorf("optimize: %w", err)
		}
		add.DataChange = false
		actions = append(actions, Action{Add: add})
		sizes = append(sizes, add.Size)
		res.FilesAdded++
		res.BytesAdded += add.Size
		for _, f := range b.Files {
			actions = append(actions, Action{Remove: f.removeAt(now, false)})
			if f.DeletionVector != nil {
				dvsRemoved++
			}
			res.FilesRemoved++
			res.BytesRemoved += f.Size
		}
		done += b.Bytes
		if opts.Progress != nil {
			opts.Progress(i+1, len(bins), done, total)
		}
	}
	predicate := "[]"
	if opts.Predicate != "" {
		p, _ := json.Marshal([]string{opts.Predicate})
		predicate = string(p)
	}
	slices.Sort(sizes)
	v, err := t.Commit(ctx, s, actions, Operation{
		Name:       "OPTIMIZE",
		Parameters: map[string]any{"predicate": predicate, "zOrderBy": "[]", "clusterBy": "[]", "auto": false},
		Metrics: map[string]any{
			"numAddedFiles": itoa(int64(res.FilesAdded)), "numRemovedFiles": itoa(int64(res.FilesRemoved)),
			"numAddedBytes": itoa(res.BytesAdded), "numRemovedBytes": itoa(res.BytesRemoved),
			"minFileSize": itoa(sizes[0]), "p50FileSize": itoa(sizes[len(sizes)/2]), "maxFileSize": itoa(sizes[len(sizes)-1]),
			"numDeletionVectorsRemoved": itoa(dvsRemoved),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("optimize: %w", err)
	}
	res.Version = v
	return res, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// compact streams the rows of a bin's files into one new data file. With
// preserve (row tracking enabled) each row's stable row ID and commit
// version, materialized or derived from its file's baseRowId and
// defaultRowCommitVersion, are written into the table's materialized
// columns behind the data columns, so the rows keep them in the new file.
func (t *Table) compact(ctx context.Context, table *StructType, partitionColumns []string, b OptimizeBin,
	preserve *rowTrackingColumns, opts WriterOptions) (*Add, error) {
	dataSchema := schema.DataSchema(table, partitionColumns)
	dataIdx := make([]int, 0, len(dataSchema.Fields))
	for _, f := range dataSchema.Fields {
		dataIdx = append(dataIdx, table.Index(f.Name))
	}
	readSchema, fileSchema := table, PhysicalSchema(dataSchema)
	if preserve != nil {
		readSchema = preserve.appendTo(table)
		fileSchema = preserve.appendTo(fileSchema)
	}
	key := NewDataFileKey(partitionColumns, LogicalPartitionValues(table, b.PartitionValues), opts.Compression)
	w, err := createDataFile(ctx, t.store, key, fileSchema, len(dataSchema.Fields), b.PartitionValues, opts)
	if err != nil {
		return nil, err
	}
	fileRow := make(Row, len(fileSchema.Fields))
	for _, f := range b.Files {
		for r, err := range DataFileIndexedRows(ctx, t.store, readSchema, partitionColumns, f) {
			if err == nil {
				for i, j := range dataIdx {
					fileRow[i] = r.Row[j]
				}
				if preserve != nil {
					err = preserve.stable(f, r, fileRow[len(dataIdx):])
				}
			}
			if err == nil {
				err = w.Write(fileRow)
			}
			if err != nil {
				w.Abort(err)
				return nil, fmt.Errorf("compact %s: %w", f.Path, err)
			}
		}
	}
	return w.Close()
}
