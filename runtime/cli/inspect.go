package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/mapping"
)

// snapshotJSON is `inspect snapshot --json`.
type snapshotJSON struct {
	Version          int64             `json:"version"`
	Timestamp        time.Time         `json:"timestamp"`
	NumFiles         int               `json:"numFiles"`
	NumRecords       int64             `json:"numRecords"`
	SizeBytes        int64             `json:"sizeBytes"`
	PartitionColumns []string          `json:"partitionColumns"`
	Schema           json.RawMessage   `json:"schema"`
	Txn              map[string]int64  `json:"txn"`
	Protocol         delta.Protocol    `json:"protocol"`
	ActiveFeatures   []string          `json:"activeFeatures"`
	Configuration    map[string]string `json:"configuration"`
}

// fileJSON is one element of `inspect files --json`; Path is exactly as in
// the log.
type fileJSON struct {
	Path            string             `json:"path"`
	Size            int64              `json:"size"`
	PartitionValues map[string]*string `json:"partitionValues"`
	NumRecords      *int64             `json:"numRecords"`
}

// historyJSON is one element of `inspect history --json`.
type historyJSON struct {
	Version             int64          `json:"version"`
	Timestamp           time.Time      `json:"timestamp"`
	Operation           string         `json:"operation"`
	OperationParameters map[string]any `json:"operationParameters,omitempty"`
	OperationMetrics    map[string]any `json:"operationMetrics,omitempty"`
}

// partitionJSON is one element of `inspect partitions --json`.
type partitionJSON struct {
	PartitionValues map[string]*string `json:"partitionValues"`
	NumFiles        int                `json:"numFiles"`
	NumRecords      int64              `json:"numRecords"`
	SizeBytes       int64              `json:"sizeBytes"`
}

func inspectCommand(out IO) *cobra.Command {
	var tf tableFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "show a table's snapshot, files, history, schema, partitions or Kafka offsets",
		Example: `  deltaflow inspect snapshot --table ./data/sensor_events
  deltaflow inspect partitions --table ./data/sensor_events --json
  deltaflow inspect history --table ./data/sensor_events --limit 5
  deltaflow inspect offsets --table ./data/sensor_events --brokers 127.0.0.1:9092`,
		RunE: needCommand,
	}
	pf := cmd.PersistentFlags()
	tf.register(pf)
	tf.registerVersion(pf)
	jsonFlag(pf, &asJSON)
	// snapshotCmd is a subcommand that shows the table at --version.
	snapshotCmd := func(use, short string, show func(ctx context.Context, s *delta.Snapshot) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: noArgs, RunE: func(cmd *cobra.Command, _ []string) error {
			_, s, err := tf.snapshot(cmd.Context())
			if err != nil {
				return err
			}
			return show(cmd.Context(), s)
		}}
	}
	var limit int
	history := &cobra.Command{Use: "history", Short: "the commits, newest first, from --version down", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tbl, err := tf.open(cmd.Context())
			if err != nil {
				return err
			}
			return inspectHistory(cmd.Context(), out.Stdout, tbl, tf.version, limit, asJSON)
		}}
	atLeast(history.Flags(), &limit, "limit", 0, 0, "show at most this many commits (0: all)")
	var of offsetsFlags
	offsets := snapshotCmd("offsets", "the Kafka offsets in the table, the NATS KV mirror and the consumer group",
		func(ctx context.Context, s *delta.Snapshot) error {
			return inspectOffsets(ctx, out.Stdout, s, of, asJSON)
		})
	of.register(offsets.Flags())
	offsets.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if tf.config == "" {
			return nil
		}
		cfg, err := tf.load()
		if err != nil {
			return err
		}
		of.defaultsFrom(cmd.Flags(), cfg)
		return nil
	}
	cmd.AddCommand(
		snapshotCmd("snapshot", "version, commit time, size, protocol and txns",
			func(_ context.Context, s *delta.Snapshot) error { return inspectSnapshot(out.Stdout, s, asJSON) }),
		snapshotCmd("files", "the live data files",
			func(_ context.Context, s *delta.Snapshot) error { return inspectFiles(out.Stdout, s, asJSON) }),
		history,
		snapshotCmd("schema", "the columns and their types",
			func(_ context.Context, s *delta.Snapshot) error { return inspectSchema(out.Stdout, s, asJSON) }),
		snapshotCmd("partitions", "files, records and bytes per partition",
			func(_ context.Context, s *delta.Snapshot) error { return inspectPartitions(out.Stdout, s, asJSON) }),
		offsets,
	)
	return cmd
}

// numRecords is a file's row count from its stats, less the rows its
// deletion vector removes; nil when the stats do not say.
func numRecords(a *delta.Add) *int64 {
	n, ok := a.NumLogicalRecords()
	if !ok {
		return nil
	}
	return &n
}

func totals(files []*delta.Add) (records, bytes int64) {
	for _, a := range files {
		if n := numRecords(a); n != nil {
			records += *n
		}
		bytes += a.Size
	}
	return records, bytes
}

func inspectSnapshot(w io.Writer, s *delta.Snapshot, asJSON bool) error {
	files := s.Files()
	records, bytes := totals(files)
	m := s.Metadata()
	js := snapshotJSON{
		Version: s.Version(), Timestamp: s.Timestamp().UTC(), NumFiles: len(files), NumRecords: records,
		SizeBytes: bytes, PartitionColumns: m.PartitionColumns, Schema: schemaJSON(m.SchemaString),
		Txn: s.Txns(), Protocol: s.Protocol(), ActiveFeatures: s.ActiveFeatures(), Configuration: m.Configuration,
	}
	if js.ActiveFeatures == nil {
		js.ActiveFeatures = []string{}
	}
	if js.PartitionColumns == nil {
		js.PartitionColumns = []string{}
	}
	if js.Configuration == nil {
		js.Configuration = map[string]string{}
	}
	if asJSON {
		return writeJSON(w, js)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%d\n", js.Version)
	fmt.Fprintf(tw, "committed\t%s\n", formatTime(js.Timestamp))
	fmt.Fprintf(tw, "files\t%d\n", js.NumFiles)
	fmt.Fprintf(tw, "records\t%d\n", js.NumRecords)
	fmt.Fprintf(tw, "size\t%s\n", humanBytes(js.SizeBytes))
	fmt.Fprintf(tw, "partition columns\t%s\n", strings.Join(js.PartitionColumns, ", "))
	fmt.Fprintf(tw, "protocol\treader %d, writer %d\n", js.Protocol.MinReaderVersion, js.Protocol.MinWriterVersion)
	if len(js.ActiveFeatures) > 0 {
		fmt.Fprintf(tw, "active features\t%s\n", strings.Join(js.ActiveFeatures, ", "))
	}
	for _, id := range slices.Sorted(maps.Keys(js.Txn)) {
		fmt.Fprintf(tw, "txn %s\t%d\n", id, js.Txn[id])
	}
	return tw.Flush()
}

// schemaJSON is the schemaString as JSON: null when a writer left it out,
// a JSON string when it is no JSON.
func schemaJSON(schemaString string) json.RawMessage {
	switch {
	case schemaString == "":
		return json.RawMessage("null")
	case json.Valid([]byte(schemaString)):
		return json.RawMessage(schemaString)
	}
	b, _ := json.Marshal(schemaString)
	return b
}

func inspectFiles(w io.Writer, s *delta.Snapshot, asJSON bool) error {
	files := s.Files()
	if asJSON {
		out := make([]fileJSON, len(files))
		for i, a := range files {
			out[i] = fileJSON{Path: a.Path, Size: a.Size, PartitionValues: s.PartitionValues(a), NumRecords: numRecords(a)}
			if out[i].PartitionValues == nil {
				out[i].PartitionValues = map[string]*string{}
			}
		}
		return writeJSON(w, out)
	}
	// Numbers right-aligned, paths left-aligned: tabwriter aligns all
	// columns one way, so the number columns are padded here.
	rows := [][2]string{{"RECORDS", "SIZE"}}
	for _, a := range files {
		n := "?"
		if r := numRecords(a); r != nil {
			n = fmt.Sprint(*r)
		}
		rows = append(rows, [2]string{n, humanBytes(a.Size)})
	}
	var wn, ws int
	for _, r := range rows {
		wn, ws = max(wn, len(r[0])), max(ws, len(r[1]))
	}
	for i, r := range rows {
		path := "PATH"
		if i > 0 {
			path = files[i-1].Path
		}
		if _, err := fmt.Fprintf(w, "%*s  %*s  %s\n", wn, r[0], ws, r[1], path); err != nil {
			return err
		}
	}
	return nil
}

func inspectHistory(ctx context.Context, w io.Writer, tbl *delta.Table, upTo int64, limit int, asJSON bool) error {
	hist, err := tbl.History(ctx, 0)
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	if upTo >= 0 {
		hist = slices.DeleteFunc(hist, func(h delta.HistoryEntry) bool { return h.Version > upTo })
	}
	if limit > 0 && len(hist) > limit {
		hist = hist[:limit]
	}
	if asJSON {
		out := make([]historyJSON, len(hist))
		for i, h := range hist {
			out[i] = historyJSON{Version: h.Version, Timestamp: h.Timestamp.UTC(), Operation: h.Operation,
				OperationParameters: h.OperationParameters, OperationMetrics: h.OperationMetrics}
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tTIMESTAMP\tOPERATION\tMETRICS")
	for _, h := range hist {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", h.Version, formatTime(h.Timestamp), h.Operation, formatMetrics(h.OperationMetrics))
	}
	return tw.Flush()
}

func formatMetrics(m map[string]any) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func inspectSchema(w io.Writer, s *delta.Snapshot, asJSON bool) error {
	st, err := s.Schema()
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, json.RawMessage(st.SchemaString()))
	}
	parts := s.PartitionColumns()
	// A column made of a registry's schema says which (mapping.OriginKey).
	origins := make([]string, len(st.Fields))
	anyOrigin := false
	for i, f := range st.Fields {
		var md map[string]any
		if json.Unmarshal(f.Metadata, &md) == nil {
			origins[i], _ = md[mapping.OriginKey].(string)
		}
		anyOrigin = anyOrigin || origins[i] != ""
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "COLUMN\tTYPE\tNULLABLE\tPARTITION"
	if anyOrigin {
		header += "\tORIGIN"
	}
	fmt.Fprintln(tw, header)
	for i, f := range st.Fields {
		typ := f.Type.String()
		if _, ok := f.Type.(delta.PrimitiveType); !ok {
			b, _ := json.Marshal(json.RawMessage(mustTypeJSON(f)))
			typ = string(b)
		}
		line := fmt.Sprintf("%s\t%s\t%t\t%t", f.Name, typ, f.Nullable, slices.Contains(parts, f.Name))
		if anyOrigin {
			line += "\t" + cmp.Or(origins[i], "-")
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// mustTypeJSON renders a complex field type as its schema JSON.
func mustTypeJSON(f delta.StructField) string {
	st := &delta.StructType{Fields: []delta.StructField{f}}
	var probe struct {
		Fields []struct {
			Type json.RawMessage `json:"type"`
		} `json:"fields"`
	}
	_ = json.Unmarshal([]byte(st.SchemaString()), &probe)
	return string(probe.Fields[0].Type)
}

func inspectPartitions(w io.Writer, s *delta.Snapshot, asJSON bool) error {
	cols := s.PartitionColumns()
	byDir := map[string]*partitionJSON{}
	for _, a := range s.Files() {
		pv := s.PartitionValues(a)
		dir := delta.PartitionDir(cols, pv)
		p := byDir[dir]
		if p == nil {
			p = &partitionJSON{PartitionValues: pv}
			byDir[dir] = p
		}
		p.NumFiles++
		p.SizeBytes += a.Size
		if n := numRecords(a); n != nil {
			p.NumRecords += *n
		}
	}
	dirs := slices.Sorted(maps.Keys(byDir))
	if asJSON {
		out := make([]*partitionJSON, len(dirs))
		for i, d := range dirs {
			out[i] = byDir[d]
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tFILES\tRECORDS\tSIZE")
	for _, d := range dirs {
		p := byDir[d]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", d, p.NumFiles, p.NumRecords, humanBytes(p.SizeBytes))
	}
	return tw.Flush()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
