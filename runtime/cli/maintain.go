package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/delta/filter"
	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// optimizeFlags are optimize's flags.
type optimizeFlags struct {
	tableFlags
	where, targetSize string
	dryRun, asJSON    bool
}

// vacuumFlags are vacuum's flags.
type vacuumFlags struct {
	tableFlags
	retain                string
	dryRun, force, asJSON bool
}

// maintenanceCommand is a table command that writes the table.
func maintenanceCommand(use, short, example string, tf *tableFlags, dryRun, asJSON *bool, dryRunUsage string, run func(context.Context) error) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Example: example, Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context()) }}
	tf.register(cmd.Flags())
	tf.registerWriter(cmd.Flags())
	cmd.Flags().BoolVar(dryRun, "dry-run", false, dryRunUsage)
	jsonFlag(cmd.Flags(), asJSON)
	return cmd
}

func optimizeCommand(out IO) *cobra.Command {
	var f optimizeFlags
	cmd := maintenanceCommand("optimize", "compact small files (Delta OPTIMIZE)",
		`  deltaflow optimize --table ./data/sensor_events --dry-run
  deltaflow optimize --table ./data/sensor_events --where "event_date >= '2026-06-01'" --target-size 64MiB`,
		&f.tableFlags, &f.dryRun, &f.asJSON,
		"show the plan without writing anything", func(ctx context.Context) error { return runOptimize(ctx, out, &f) })
	cmd.Flags().StringVar(&f.where, "where", "", "compact only partitions matching this `filter` on partition columns, e.g. \"event_date >= '2026-06-01'\"")
	cmd.Flags().StringVar(&f.targetSize, "target-size", "128MiB", "`size` compacted files aim for; files this big are left alone")
	return cmd
}

func vacuumCommand(out IO) *cobra.Command {
	var f vacuumFlags
	cmd := maintenanceCommand("vacuum", "delete unreferenced files and expired log entries (VACUUM)",
		`  deltaflow vacuum --table ./data/sensor_events --dry-run
  deltaflow vacuum --table ./data/sensor_events --retain 30d --json`,
		&f.tableFlags, &f.dryRun, &f.asJSON,
		"list the files that would be deleted; delete nothing", func(ctx context.Context) error { return runVacuum(ctx, out, &f) })
	cmd.Flags().StringVar(&f.retain, "retain", "720h", "keep files removed less than this `duration` ago (Go duration or days, e.g. 30d)")
	cmd.Flags().BoolVar(&f.force, "force", false, "allow a retention shorter than the table's delta.deletedFileRetentionDuration (168h unless the table sets it)")
	return cmd
}

// optimizeJSON is `optimize --json`.
type optimizeJSON struct {
	// Version is the version planned from; CommittedVersion the one
	// written, null when nothing was (a dry run, nothing to do).
	Version          int64     `json:"version"`
	CommittedVersion *int64    `json:"committedVersion"`
	DryRun           bool      `json:"dryRun"`
	TargetSizeBytes  int64     `json:"targetSizeBytes"`
	Bins             []binJSON `json:"bins"`
	FilesRemoved     int       `json:"filesRemoved"`
	BytesRemoved     int64     `json:"bytesRemoved"`
	FilesAdded       int       `json:"filesAdded"`
	BytesAdded       int64     `json:"bytesAdded"`
}

// binJSON is one bin of files optimize compacts into one.
type binJSON struct {
	Partition string `json:"partition"`
	NumFiles  int    `json:"numFiles"`
	SizeBytes int64  `json:"sizeBytes"`
}

func runOptimize(ctx context.Context, out IO, f *optimizeFlags) error {
	target, err := daemon.ParseByteSize(f.targetSize)
	if err != nil || target <= 0 {
		return usagef("--target-size %q: want a positive size such as 128MiB", f.targetSize)
	}
	tbl, snap, err := f.writable(ctx, out.Stderr, f.dryRun)
	if err != nil {
		return err
	}
	opts := delta.OptimizeOptions{TargetSize: int64(target), DryRun: f.dryRun}
	if f.where != "" {
		b, err := bindFilter(snap, f.where)
		if err != nil {
			return err
		}
		if err := b.OnlyPartitionColumns(); err != nil {
			return usagef("--where: %v (optimize filters on partition columns only: %s)", err, strings.Join(snap.PartitionColumns(), ", "))
		}
		// A partition value the filter cannot read fails here, before
		// anything is written, instead of silently leaving files out.
		for _, a := range snap.Files() {
			if _, err := b.MatchPartition(snap.PartitionValues(a)); err != nil {
				return fmt.Errorf("--where on %s: %w", a.Path, err)
			}
		}
		opts.Filter = func(pv map[string]*string) bool {
			ok, _ := b.MatchPartition(pv)
			return ok
		}
		opts.Predicate = b.String()
	}
	var bar *progressBar
	if !f.dryRun {
		bar = newProgressBar(out.Stderr, "optimize")
		opts.Progress = bar.update
	}
	start := time.Now()
	res, err := tbl.Optimize(ctx, snap, opts)
	bar.finish()
	if delta.IsConflict(err, delta.ConflictDelete) {
		return fmt.Errorf("%w\na concurrent commit (another OPTIMIZE, or a delete) removed a file this run compacted; "+
			"nothing was committed (the files written are orphans VACUUM removes): run optimize again", err)
	}
	if err != nil {
		return err
	}
	js := optimizeJSON{Version: snap.Version(), DryRun: f.dryRun, TargetSizeBytes: int64(target), Bins: []binJSON{},
		FilesRemoved: res.FilesRemoved, BytesRemoved: res.BytesRemoved, FilesAdded: res.FilesAdded, BytesAdded: res.BytesAdded}
	if res.Version >= 0 {
		js.CommittedVersion = &res.Version
	}
	var files int
	var bytes int64
	for _, b := range res.Bins {
		js.Bins = append(js.Bins, binJSON{Partition: partitionLabel(snap, b.Files[0]), NumFiles: len(b.Files), SizeBytes: b.Bytes})
		files += len(b.Files)
		bytes += b.Bytes
	}
	switch {
	case f.asJSON:
		return writeJSON(out.Stdout, js)
	case len(res.Bins) == 0:
		fmt.Fprintf(out.Stdout, "nothing to optimize at version %d (no partition has two files under %s)\n", snap.Version(), humanBytes(int64(target)))
	case f.dryRun:
		fmt.Fprintf(out.Stdout, "dry run: would compact %d files (%s) into %d at version %d\n", files, humanBytes(bytes), len(res.Bins), snap.Version())
		for _, b := range js.Bins {
			fmt.Fprintf(out.Stdout, "  %s: %d files, %s\n", b.Partition, b.NumFiles, humanBytes(b.SizeBytes))
		}
	default:
		fmt.Fprintf(out.Stdout, "optimized: removed %d files (%s), added %d files (%s); version %d; took %s\n",
			res.FilesRemoved, humanBytes(res.BytesRemoved), res.FilesAdded, humanBytes(res.BytesAdded), res.Version,
			time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func partitionLabel(s *delta.Snapshot, a *delta.Add) string {
	if d := delta.PartitionDir(s.PartitionColumns(), s.PartitionValues(a)); d != "" {
		return d
	}
	return "(unpartitioned)"
}

// bindFilter parses a --where filter against the snapshot's schema; a bad
// filter is a usage error (exit 2).
func bindFilter(s *delta.Snapshot, src string) (*filter.Bound, error) {
	e, err := filter.Parse(src)
	if err != nil {
		return nil, usagef("--where: %v", err)
	}
	schema, err := s.Schema()
	if err != nil {
		return nil, err
	}
	b, err := filter.Bind(e, schema, s.PartitionColumns())
	if err != nil {
		return nil, usagef("--where: %v", err)
	}
	return b, nil
}

// vacuumJSON is `vacuum --json`. Retention and LogRetention are Go
// durations ("720h0m0s").
type vacuumJSON struct {
	// Version is the table version after the run (the one vacuumed on a
	// dry run).
	Version      int64    `json:"version"`
	DryRun       bool     `json:"dryRun"`
	Retention    string   `json:"retention"`
	Files        []string `json:"files"`
	Bytes        int64    `json:"bytes"`
	LogFiles     []string `json:"logFiles"`
	LogRetention string   `json:"logRetention,omitempty"`
}

func runVacuum(ctx context.Context, out IO, f *vacuumFlags) error {
	retain, err := parseRetention(f.retain)
	if err != nil {
		return usagef("--retain: %v", err)
	}
	tbl, snap, err := f.writable(ctx, out.Stderr, f.dryRun)
	if err != nil {
		return err
	}
	// delta reads a zero Retention as "the table's default"; --retain 0
	// means "keep nothing", so ask for the smallest positive one.
	opts := delta.VacuumOptions{Retention: max(retain, time.Nanosecond), Force: f.force, DryRun: f.dryRun}
	res, err := tbl.Vacuum(ctx, snap, opts)
	if errors.Is(err, delta.ErrRetentionTooShort) {
		return fmt.Errorf("refusing to vacuum with --retain %s: it is shorter than the table's deleted file retention %s, "+
			"and a reader or writer of an older version may still need those files; pass --force if none does",
			retain, snap.DeletedFileRetention())
	}
	if err != nil {
		return err
	}
	js := vacuumJSON{Version: snap.Version(), DryRun: f.dryRun, Retention: retain.String(), Files: res.Files, Bytes: res.Bytes, LogFiles: []string{}}
	if js.Files == nil {
		js.Files = []string{}
	}
	if !f.dryRun {
		after, err := tbl.Snapshot(ctx)
		if err != nil {
			return fmt.Errorf("re-read table after vacuum: %w", err)
		}
		logs, err := tbl.CleanupLog(ctx, after)
		if err != nil {
			return err
		}
		js.Version, js.LogRetention = after.Version(), after.LogRetention().String()
		if logs != nil {
			js.LogFiles = logs
		}
	}
	switch {
	case f.asJSON:
		return writeJSON(out.Stdout, js)
	case f.dryRun:
		for _, k := range res.Files {
			fmt.Fprintf(out.Stdout, "would delete %s\n", k)
		}
		fmt.Fprintf(out.Stdout, "dry run: would delete %d files (%s) unreferenced for %s at version %d\n",
			len(res.Files), humanBytes(res.Bytes), retain, js.Version)
	default:
		fmt.Fprintf(out.Stdout, "vacuumed: deleted %d files (%s) unreferenced for %s; log cleanup deleted %d files (log retention %s); version %d\n",
			len(res.Files), humanBytes(res.Bytes), retain, len(js.LogFiles), js.LogRetention, js.Version)
	}
	return nil
}

// parseRetention accepts a Go duration ("720h") or whole or fractional days
// ("30d", as optimize.py's VACUUM_RETAIN_DAYS).
func parseRetention(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: want a duration such as 720h or 30d", s)
		}
		d = time.Duration(n * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want a duration such as 720h or 30d", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	return d, nil
}

// progressBar shows OPTIMIZE's progress: a bar redrawn with \r on a
// terminal, one plain line per bin otherwise (logs, CI).
type progressBar struct {
	w     io.Writer
	label string
	tty   bool
	drawn bool
}

func newProgressBar(w io.Writer, label string) *progressBar {
	f, ok := w.(*os.File)
	return &progressBar{w: w, label: label, tty: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progressBar) update(done, total int, bytesDone, bytesTotal int64) {
	if !p.tty {
		fmt.Fprintf(p.w, "%s: %d/%d bins, %s of %s\n", p.label, done, total, humanBytes(bytesDone), humanBytes(bytesTotal))
		return
	}
	const width = 30
	filled := 0
	if bytesTotal > 0 {
		filled = int(int64(width) * bytesDone / bytesTotal)
	}
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d bins, %s of %s ", p.label, strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		done, total, humanBytes(bytesDone), humanBytes(bytesTotal))
	p.drawn = true
}

// finish ends the bar's line; nil-safe.
func (p *progressBar) finish() {
	if p != nil && p.drawn {
		fmt.Fprintln(p.w)
	}
}
