package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/schemareg"
	"github.com/deltaflow/deltaflow/storage"
	"github.com/deltaflow/deltaflow/upsert"
)

// Config is the deltaflow configuration file (configs/deltaflow.yaml). A
// key is a field of a section below (its yaml tag the name, its Go type the
// type) and its entry in keySpecs (configdoc.go: documentation, environment
// variable, empty values); its default is DefaultConfig's. They make
// docs/configuration.md, Load's environment overrides and checks, the
// start-up log and `config check`; the fields carry no comments of their
// own, so nothing drifts from the spec.
type Config struct {
	Table        TableConfig        `yaml:"table"`
	Tables       []RouteConfig      `yaml:"tables"`
	Unrouted     string             `yaml:"unrouted"`
	Storage      StorageConfig      `yaml:"storage"`
	Kafka        kafka.Config       `yaml:"kafka"`
	NATS         bridge.Config      `yaml:"nats"`
	Flush        FlushConfig        `yaml:"flush"`
	Backpressure BackpressureConfig `yaml:"backpressure"`
	HTTP         HTTPConfig         `yaml:"http"`
	Log          LogConfig          `yaml:"log"`
	Maintenance  MaintenanceConfig  `yaml:"maintenance"`
	Watchdog     WatchdogConfig     `yaml:"watchdog"`
	Control      ControlConfig      `yaml:"control"`
	// SchemaRegistry is process-wide: every avro or protobuf table without
	// a schema_file, and every json_schema one, reads it.
	SchemaRegistry schemareg.Config `yaml:"schema_registry"`

	// schemas is the registry, once run has connected it (resolveSchemas).
	schemas *schemareg.Registry
}

// TableConfig is the `table` section: where the table lives and how records
// map to its columns.
type TableConfig struct {
	URI                string           `yaml:"uri"`
	Name               string           `yaml:"name"`
	AppID              string           `yaml:"app_id"`
	PartitionColumns   []string         `yaml:"partition_columns"`
	Mode               mapping.Mode     `yaml:"mode"`
	MaxRecordBytes     ByteSize         `yaml:"max_record_bytes"`
	Columns            []mapping.Column `yaml:"columns"`
	Format             mapping.Format   `yaml:"format"`
	KeyFormat          mapping.Format   `yaml:"key_format"`
	WriteMode          string           `yaml:"write_mode"`
	KeyColumns         []string         `yaml:"key_columns"`
	UpsertStrategy     string           `yaml:"upsert_strategy"`
	DeleteWhen         string           `yaml:"delete_when"`
	SequenceBy         string           `yaml:"sequence_by"`
	DeleteRetention    time.Duration    `yaml:"delete_retention"`
	KeyIndexMemory     ByteSize         `yaml:"key_index_memory"`
	CDC                string           `yaml:"cdc"`
	SchemaFile         string           `yaml:"schema_file"`
	Subject            string           `yaml:"subject"`
	Message            string           `yaml:"message"`
	SchemaEvolution    string           `yaml:"schema_evolution"`
	CheckpointInterval int              `yaml:"checkpoint_interval"`
	Compression        string           `yaml:"compression"`

	// latest is the registry subject's latest schema, once run has asked
	// for it (resolveSchemas): the columns come from it.
	latest string
	// latestOrigin names it: its subject and schema id.
	latestOrigin string
}

// StorageConfig is the `storage` section: S3/MinIO access for s3:// tables.
type StorageConfig struct {
	Endpoint     string        `yaml:"endpoint"`
	AccessKey    string        `yaml:"access_key"`
	SecretKey    secret.Secret `yaml:"secret_key"`
	Region       string        `yaml:"region"`
	Secure       *bool         `yaml:"secure"`
	CAFile       string        `yaml:"ca_file"`
	SingleWriter bool          `yaml:"single_writer"`
}

// FlushConfig is the `flush` section: when an epoch is committed.
type FlushConfig struct {
	Interval     time.Duration `yaml:"interval"`
	MaxBytes     ByteSize      `yaml:"max_bytes"`
	RowGroupRows int           `yaml:"row_group_rows"`
}

// BackpressureConfig is the `backpressure` section.
type BackpressureConfig struct {
	MemoryBudget        ByteSize `yaml:"memory_budget"`
	MaxUnfinishedEpochs int      `yaml:"max_unfinished_epochs"`
}

// HTTPConfig is the `http` section.
type HTTPConfig struct {
	Listen string `yaml:"listen"`
}

// LogConfig is the `log` section.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// MaintenanceConfig is the `maintenance` section (OPTIMIZE, VACUUM and
// log cleanup).
type MaintenanceConfig struct {
	OptimizeEvery          time.Duration `yaml:"optimize_every"`
	OptimizeTargetSize     ByteSize      `yaml:"optimize_target_size"`
	OptimizeMinFiles       int           `yaml:"optimize_min_files"`
	OptimizeOpenTargetSize ByteSize      `yaml:"optimize_open_target_size"`
	VacuumEvery            time.Duration `yaml:"vacuum_every"`
	VacuumRetain           time.Duration `yaml:"vacuum_retain"`
	LogCleanup             bool          `yaml:"log_cleanup"`
}

// WatchdogConfig is the `watchdog` section: process-level self-healing.
// Records waiting in Kafka with no epoch committed for StallIntervals
// flush intervals (or the pipeline failing at its backoff cap that long) is
// a stall: /healthz and /readyz report it and a `stalled` event goes out;
// lasting Grace, the process exits non-zero (never while a commit is in
// flight) for its restart policy to start a fresh one.
type WatchdogConfig struct {
	StallIntervals    int           `yaml:"stall_intervals"`
	Grace             time.Duration `yaml:"grace"`
	RestartBackoff    time.Duration `yaml:"restart_backoff"`
	RestartBackoffMax time.Duration `yaml:"restart_backoff_max"`
}

// MaxPauseLimit bounds control.max_pause: whoever may call the control
// service (a leaked credential, say) stops ingestion at most this long at
// a time, and a pause past a day is a job for stopping the daemon.
const MaxPauseLimit = 24 * time.Hour

// ControlConfig is the `control` section: the NATS control service.
type ControlConfig struct {
	MaxPause time.Duration `yaml:"max_pause"`
}

// DefaultConfig returns the configuration with every default filled in.
// The nats section stays zero: bridge fills its defaults itself, and
// nats.store_dir depends on table.uri (see Load).
func DefaultConfig() Config {
	m := mapping.DefaultConfig()
	engine := actors.DefaultConfig()
	return Config{
		Table: TableConfig{
			URI:                "./data/sensor_events",
			Name:               "sensor_events",
			AppID:              engine.App,
			PartitionColumns:   slices.Clone(mapping.DefaultPartitionColumns),
			Mode:               m.Mode,
			MaxRecordBytes:     ByteSize(m.MaxRecordBytes),
			Columns:            m.Columns,
			Format:             mapping.JSON,
			SchemaEvolution:    EvolveAddColumns,
			WriteMode:          WriteAppend,
			UpsertStrategy:     UpsertDeletionVectors,
			DeleteRetention:    DefaultDeleteRetention,
			KeyIndexMemory:     DefaultKeyIndexMemory,
			CheckpointInterval: 10,
			Compression:        "snappy",
		},
		Kafka: kafka.DefaultConfig(),
		Flush: FlushConfig{Interval: engine.FlushInterval, MaxBytes: ByteSize(engine.FlushMaxBytes),
			RowGroupRows: engine.Writer.RowGroupRows},
		Backpressure: BackpressureConfig{MemoryBudget: ByteSize(engine.MemoryBudget), MaxUnfinishedEpochs: engine.MaxUnfinishedEpochs},
		HTTP:         HTTPConfig{Listen: "127.0.0.1:8080"},
		Log:          LogConfig{Level: "info", Format: "text"},
		Maintenance: MaintenanceConfig{OptimizeTargetSize: ByteSize(delta.DefaultTargetFileSize), OptimizeMinFiles: actors.DefaultOptimizeMinFiles,
			OptimizeOpenTargetSize: actors.DefaultOpenTargetSize,
			VacuumRetain:           720 * time.Hour, LogCleanup: true},
		Watchdog:       WatchdogConfig{StallIntervals: 10, Grace: time.Minute, RestartBackoff: time.Minute, RestartBackoffMax: 30 * time.Minute},
		Control:        ControlConfig{MaxPause: time.Hour},
		Unrouted:       engine.Unrouted,
		SchemaRegistry: schemareg.Config{Timeout: schemareg.DefaultTimeout},
	}
}

// Load reads the YAML file at path (empty: no file, defaults only), applies
// the environment overrides read through getenv, fills the derived defaults,
// expands the {hostname} placeholder of kafka.instance_id and validates the
// result.
//
// Defaults are in place before the file is decoded, so a key the file omits
// keeps its default while a key set to zero stays zero and is reported by
// Validate (`flush.interval: 0s` is an error, not "use the default"), and
// a key set empty ("", [], null) is refused when it has a default (see
// decode). Every error names its key, with the file's line or the
// environment variable that set it: `flush.interval (line 4) must be > 0`,
// `flush.interval ($FLUSH_INTERVAL) must be > 0`.
func Load(path string, getenv func(string) string) (*Config, error) {
	cfg := DefaultConfig()
	var lines keyLines
	var tables *yaml.Node
	// Every error is reported in one run: a key the file or the
	// environment gets wrong keeps its default, and the rest is checked.
	// located are the errors that say where their key was set.
	var located []error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		if lines, tables, err = decode(data, &cfg); err != nil {
			if lines == nil { // not YAML
				return nil, fmt.Errorf("config %s: %w", path, err)
			}
			located = append(located, err)
		}
	}
	// The environment overrides the file, decoded and checked as the file
	// is (keySpecs' env).
	envDoc, fromEnv := envDocument(getenv)
	if envDoc != nil {
		if _, err := decodeNode(envDoc, &cfg, fromEnv); err != nil {
			located = append(located, err)
		}
	}
	located = append(located, cfg.resolveTables(tables), cfg.singleOrList(lines, fromEnv))
	cfg.deriveDefaults()
	located = append(located, cfg.formatDefaults(lines))
	cfg.sequenceDefaults(lines)
	rest := errors.Join(cfg.expandInstanceID(), cfg.Validate(), cfg.checkCredentials(getenv))
	if err := errors.Join(append(located, withLines(rest, lines, fromEnv))...); err != nil {
		if path != "" {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		return nil, err
	}
	return &cfg, nil
}

// checkCredentials names the credentials run needs that neither the file
// nor the environment gives: an s3:// table's endpoint and keys, an
// external NATS server's password for nats.user. Without them every
// start fails (a refused login, anonymous S3 requests), so the
// configuration is not valid.
func (c *Config) checkCredentials(getenv func(string) string) error {
	var errs []error
	for _, r := range c.Routes() {
		if err := storage.CheckCredentials(r.Table.URI, c.StorageOptions(), getenv); err != nil {
			errs = append(errs, fmt.Errorf("storage: table %s: %w", r.Table.URI, err))
			break // the same for every table
		}
	}
	if n := c.NATS; n.URL != "" && n.User != "" && n.Password == "" {
		errs = append(errs, fmt.Errorf("nats.password: empty: nats.user %q logs in to %s with it; set $NATS_PASSWORD", n.User, secret.RedactURL(n.URL)))
	}
	return errors.Join(errs...)
}

func implementsUnmarshaler(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]())
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// yamlFields maps the YAML key of each field of struct t to the field; the
// fields of an inlined struct (`yaml:",inline"`) are t's, their Index the
// path to them.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for _, f := range yamlFieldList(t) {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		out[name] = f
	}
	return out
}

// yamlFieldList is t's YAML fields in declaration order, inlined structs'
// in their place.
func yamlFieldList(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			for _, in := range yamlFieldList(f.Type) {
				in.Index = append(slices.Clone(f.Index), in.Index...)
				out = append(out, in)
			}
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, f)
	}
	return out
}

// deriveDefaults fills the defaults that depend on other keys (and so must
// follow the environment overrides).
func (c *Config) deriveDefaults() {
	if c.NATS.URL == "" && c.NATS.StoreDir == "" {
		c.NATS.StoreDir = defaultNATSStoreDir(c.Table.URI)
	}
}

// formatDefaults drops the Spark job's columns and partition columns from
// the tables of a binary format that the file does not give them: such a
// table's columns are its schema's fields, unpartitioned. A JSON table
// whose file gives columns but not partition columns keeps the default
// ones, which must be among its columns.
func (c *Config) formatDefaults(lines keyLines) error {
	var errs []error
	settle := func(t *TableConfig, section string) {
		_, columnsGiven := lines[section+".columns"]
		_, partitionsGiven := lines[section+".partition_columns"]
		if t.Format == mapping.JSON {
			if columnsGiven && !partitionsGiven && !namesColumns(t.Columns, t.PartitionColumns) {
				// The default partition columns are the default columns':
				// say so rather than name a key the file does not have.
				errs = append(errs, fmt.Errorf("%s.columns (line %d): replaces the default columns, and the default %s.partition_columns %v "+
					"names columns it lacks: give %s.partition_columns too ([] for none)", section, lines[section+".columns"], section,
					t.PartitionColumns, section))
				t.PartitionColumns = []string{}
			}
			return
		}
		if !columnsGiven {
			t.Columns = nil
		}
		if !partitionsGiven {
			t.PartitionColumns = []string{}
		}
	}
	c.eachTable(settle)
	return errors.Join(errs...)
}

// eachTable calls f with every table section and its key: the single
// form's and each route's.
func (c *Config) eachTable(f func(t *TableConfig, section string)) {
	f(&c.Table, "table")
	for i := range c.Tables {
		f(&c.Tables[i].TableConfig, fmt.Sprintf("tables[%d]", i))
	}
}

// sequenceDefaults orders a Debezium upsert table that does not say
// sequence_by by the change's log position: its one column whose source
// is cdc.source.lsn (PostgreSQL's) or cdc.source.binlog_position (MySQL's
// and MariaDB's). The position, unlike the offset, also
// orders a change Kafka Connect sends again after a restart, or a
// re-snapshot, behind the newer ones. `sequence_by: ""` keeps the offset.
func (c *Config) sequenceDefaults(lines keyLines) {
	c.eachTable(func(t *TableConfig, section string) {
		if _, given := lines[section+".sequence_by"]; given || t.SequenceBy != "" || t.CDC != mapping.CDCDebezium || t.WriteMode != WriteUpsert {
			return
		}
		var found []string
		for _, col := range t.Columns {
			if slices.Contains(cdcPositionSources, col.Source) {
				found = append(found, col.Name)
			}
		}
		if len(found) == 1 {
			t.SequenceBy = found[0]
		}
	})
}

// cdcPositionSources are the sources of a Debezium change's position in
// its database's log, which grows with every change: PostgreSQL's, and
// MySQL's binlog position made one long.
var cdcPositionSources = []string{"cdc.source.lsn", mapping.BinlogPositionSource}

// namesColumns reports whether every name is a column's.
func namesColumns(cols []mapping.Column, names []string) bool {
	for _, n := range names {
		if !slices.ContainsFunc(cols, func(c mapping.Column) bool { return c.Name == n }) {
			return false
		}
	}
	return true
}

// defaultNATSStoreDir keeps the embedded server's JetStream store next to a
// local table (./data/sensor_events → ./data/nats), so one data directory
// holds all state; for a remote table it goes under the temp directory.
func defaultNATSStoreDir(tableURI string) string {
	if p, ok := localPath(tableURI); ok {
		return filepath.Join(filepath.Dir(filepath.Clean(p)), "nats")
	}
	return filepath.Join(os.TempDir(), "deltaflow-nats")
}

// localPath returns the directory of a local table URI.
func localPath(uri string) (string, bool) {
	if !strings.Contains(uri, "://") {
		return uri, uri != ""
	}
	if u, err := url.Parse(uri); err == nil && u.Scheme == "file" {
		return u.Path, u.Path != ""
	}
	return "", false
}

// MappingConfig is the table section as the mapper takes it.
func (c *Config) MappingConfig() mapping.Config { return c.Table.mappingConfig("table", c.schemas) }

// EngineConfig is the engine's configuration: this one's, with the data
// file settings of tableConf (the table's delta.* properties) applied.
func (c *Config) EngineConfig(tableConf map[string]string) (actors.Config, error) {
	writer := c.writerOptions()
	if err := writer.ApplyTableConfig(tableConf); err != nil {
		return actors.Config{}, fmt.Errorf("table configuration: %w", err)
	}
	m := c.Maintenance
	return actors.Config{
		App: c.Table.AppID, StartOffset: c.Kafka.StartOffset, OnDataLoss: c.Kafka.OnDataLoss, Unrouted: c.Unrouted,
		FlushInterval: c.Flush.Interval,
		FlushMaxBytes: int64(c.Flush.MaxBytes), MemoryBudget: int64(c.Backpressure.MemoryBudget),
		MaxUnfinishedEpochs: c.Backpressure.MaxUnfinishedEpochs, Writer: writer,
		Maintenance: actors.Maintenance{OptimizeEvery: m.OptimizeEvery, OptimizeTargetSize: int64(m.OptimizeTargetSize),
			OptimizeMinFiles: m.OptimizeMinFiles, OptimizeOpenTargetSize: int64(m.OptimizeOpenTargetSize),
			VacuumEvery: m.VacuumEvery, VacuumRetain: m.VacuumRetain, LogCleanupAfterCheckpoint: m.LogCleanup},
	}, nil
}

// writerOptions are the data file options this configuration sets.
func (c *Config) writerOptions() delta.WriterOptions {
	return delta.WriterOptions{Compression: c.compression(), RowGroupRows: c.Flush.RowGroupRows}
}

// WriterOptions are the options of data files written into the table of
// snap besides the engine's (dlq replay): this configuration's, with those
// the table asks for (its delta.* properties, materialized partition
// columns) applied, as `run` gives the engine.
func (c *Config) WriterOptions(snap *delta.Snapshot) (delta.WriterOptions, error) {
	writer := c.writerOptions()
	if err := snap.ApplyWriterOptions(&writer); err != nil {
		return delta.WriterOptions{}, fmt.Errorf("table %s: %w", c.Table.URI, err)
	}
	return writer, nil
}

// compression returns the data file codec.
func (c *Config) compression() delta.Compression {
	if c.Table.Compression == "zstd" {
		return delta.Zstd
	}
	return delta.Snappy
}

// Validate checks every section and returns all problems found, each naming
// its key, as in "flush.interval must be > 0".
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if len(c.Kafka.Brokers) == 0 {
		bad("kafka.brokers must list at least one host:port")
	}
	if c.Kafka.Topic == "" && len(c.Tables) == 0 {
		bad("kafka.topic must be set")
	}
	if c.Kafka.Group == "" && c.Kafka.Mode != kafka.ModePartitions {
		bad("kafka.group must be set (mode group)")
	}
	if len(c.Tables) == 0 {
		errs = append(errs, c.Table.validate("table")...)
		if _, err := c.checkedMapper(c.Table, "table"); err != nil {
			errs = append(errs, err) // names table.columns[i]... or table.partition_columns[i]
		}
	} else {
		errs = append(errs, c.validateRoutes()...)
	}
	if c.Unrouted != UnroutedSkip && c.Unrouted != UnroutedDLQ {
		bad("unrouted: unknown %q (want %s or %s)", c.Unrouted, UnroutedSkip, UnroutedDLQ)
	}
	if ep := c.Storage.Endpoint; ep != "" && strings.Contains(ep, "://") {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("storage.endpoint: %q is not host:port or http(s)://host:port", ep)
		}
	}
	if f := c.Storage.CAFile; f != "" {
		if _, err := os.Stat(f); err != nil {
			bad("storage.ca_file: %v", err)
		}
	}
	if err := c.Kafka.Validate(); err != nil {
		errs = append(errs, err) // names kafka.<key>
	}
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err) // names nats.<key>
	}
	errs = append(errs, c.Flush.validate("flush")...)
	if c.Backpressure.MemoryBudget <= 0 {
		bad("backpressure.memory_budget must be > 0, got %s", c.Backpressure.MemoryBudget)
	}
	if c.Backpressure.MaxUnfinishedEpochs < 1 {
		bad("backpressure.max_unfinished_epochs must be >= 1, got %d", c.Backpressure.MaxUnfinishedEpochs)
	}
	if l := c.HTTP.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			bad("http.listen: %q is not host:port (or \"\" to disable)", l)
		}
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad("log.level: %v", err)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format: unknown %q (want text or json)", c.Log.Format)
	}
	errs = append(errs, c.Maintenance.validate("maintenance")...)
	errs = append(errs, validateRegistry(c.SchemaRegistry)...)
	w := c.Watchdog
	if w.StallIntervals < 0 {
		bad("watchdog.stall_intervals must be >= 0 (0 disables), got %d", w.StallIntervals)
	}
	if w.Grace < 0 {
		bad("watchdog.grace must be >= 0, got %s", w.Grace)
	}
	if w.RestartBackoff <= 0 {
		bad("watchdog.restart_backoff must be > 0, got %s", w.RestartBackoff)
	}
	if w.RestartBackoffMax < w.RestartBackoff {
		bad("watchdog.restart_backoff_max must be >= watchdog.restart_backoff (%s), got %s", w.RestartBackoff, w.RestartBackoffMax)
	}
	if c.Control.MaxPause <= 0 || c.Control.MaxPause > MaxPauseLimit {
		bad("control.max_pause must be > 0 and at most %s, got %s", MaxPauseLimit, c.Control.MaxPause)
	}
	return errors.Join(errs...)
}

// validate checks a table section whose keys are under section ("table",
// "tables[2]").
func (t TableConfig) validate(section string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(section+"."+format, args...)) }
	if t.URI == "" {
		bad("uri must be set")
	} else if err := checkTableURI(t.URI); err != nil {
		bad("uri: %v", err)
	}
	if t.Name == "" {
		bad("name must be set")
	}
	if t.AppID == "" {
		bad("app_id must be set")
	}
	if t.MaxRecordBytes > 1<<30 {
		bad("max_record_bytes must be <= 1GiB, got %s", t.MaxRecordBytes)
	}
	if t.SchemaEvolution != EvolveAddColumns && t.SchemaEvolution != EvolveNone {
		bad("schema_evolution: unknown %q (want %s or %s)", t.SchemaEvolution, EvolveAddColumns, EvolveNone)
	}
	if t.Subject != "" && !t.readsRegistry() {
		bad("subject: only a format: avro or protobuf table without schema_file, or a json_schema one, reads a registry subject")
	}
	if t.Message != "" && t.Format != mapping.Protobuf {
		bad("message: only a format: protobuf table picks a message")
	}
	switch {
	case t.WriteMode != WriteAppend && t.WriteMode != WriteUpsert:
		bad("write_mode: unknown %q (want %s or %s)", t.WriteMode, WriteAppend, WriteUpsert)
	case t.WriteMode == WriteUpsert && len(t.KeyColumns) == 0:
		bad("key_columns: write_mode upsert needs the columns that identify a row")
	case t.WriteMode == WriteAppend && len(t.KeyColumns) > 0:
		bad("key_columns: only a write_mode: upsert table has key columns")
	case t.WriteMode == WriteAppend && t.DeleteWhen != "":
		bad("delete_when: only a write_mode: upsert table deletes rows")
	case t.WriteMode == WriteAppend && t.SequenceBy != "":
		bad("sequence_by: only a write_mode: upsert table orders the changes of a key")
	case slices.Contains(t.KeyColumns, t.SequenceBy) && t.SequenceBy != "":
		bad("sequence_by: %q is a key column; the sequence orders the changes of one key", t.SequenceBy)
	case slices.Contains(t.PartitionColumns, t.SequenceBy) && t.SequenceBy != "":
		bad("sequence_by: %q is a partition column; the sequence must be a data column", t.SequenceBy)
	}
	if t.DeleteRetention <= 0 {
		bad("delete_retention must be > 0, got %s", t.DeleteRetention)
	}
	if t.KeyIndexMemory < 0 {
		bad("key_index_memory must be >= 0 (0: no key index), got %s", t.KeyIndexMemory)
	}
	if t.UpsertStrategy != UpsertDeletionVectors && t.UpsertStrategy != UpsertCopyOnWrite {
		bad("upsert_strategy: unknown %q (want %s or %s)", t.UpsertStrategy, UpsertDeletionVectors, UpsertCopyOnWrite)
	}
	for i, k := range t.KeyColumns {
		if slices.Contains(t.PartitionColumns, k) {
			bad("key_columns[%d]: %q is a partition column; a key column must be a data column", i, k)
		}
	}
	if t.CheckpointInterval <= 0 {
		bad("checkpoint_interval must be > 0, got %d", t.CheckpointInterval)
	}
	if t.Compression != "snappy" && t.Compression != "zstd" {
		bad("compression: unknown %q (want snappy or zstd)", t.Compression)
	}
	return errs
}

// mappingConfig is the table section as the mapper takes it; errors name
// its keys under section. A table reading the registry decodes through
// schemas (nil until run connects it).
func (t TableConfig) mappingConfig(section string, schemas *schemareg.Registry) mapping.Config {
	mc := mapping.Config{Mode: t.Mode, MaxRecordBytes: int(t.MaxRecordBytes), Columns: t.Columns, Format: t.Format,
		SchemaFile: t.SchemaFile, Message: t.Message, KeyFormat: t.KeyFormat, Key: section, Tombstones: t.WriteMode == WriteUpsert, CDC: t.CDC}
	if schemas != nil && t.keyReadsRegistry() {
		mc.Registry = schemas
	}
	if schemas != nil && t.readsRegistry() {
		mc.Registry, mc.Schema, mc.SchemaOrigin = schemas, t.latest, t.latestOrigin
		mc.Evolve = t.SchemaEvolution == EvolveAddColumns && len(t.Columns) == 0
	}
	return mc
}

// DefaultDeleteRetention is how long an upsert table ordered by a
// sequence_by column remembers a deleted key's sequence.
const DefaultDeleteRetention = 7 * 24 * time.Hour

// DefaultKeyIndexMemory bounds an upsert table's key → file index
// (upsert.KeyIndex): a quarter of the default memory budget, the filters
// of about 1.6 million keys at 2.5 bytes a key.
const DefaultKeyIndexMemory = 4 << 20

// What table.write_mode may say.
const (
	WriteAppend = "append"
	WriteUpsert = "upsert"
)

// What table.upsert_strategy may say.
const (
	UpsertDeletionVectors = "deletion_vectors"
	UpsertCopyOnWrite     = "copy_on_write"
)

// deletionVectors reports whether the table is an upsert table that marks
// replaced rows in deletion vectors.
func (t TableConfig) deletionVectors() bool {
	return t.WriteMode == WriteUpsert && t.UpsertStrategy != UpsertCopyOnWrite
}

// createConf is the configuration of the table t creates: its checkpoint
// interval, and deletion vectors for an upsert table.
func (t TableConfig) createConf() map[string]string {
	conf := map[string]string{"delta.checkpointInterval": strconv.Itoa(t.CheckpointInterval)}
	if t.deletionVectors() {
		conf[deletionVectorsProperty] = "true"
	}
	return conf
}

// deletionVectorsProperty allows a table's writers to write deletion
// vectors, which upserts do.
const deletionVectorsProperty = "delta.enableDeletionVectors"

// What table.schema_evolution may say.
const (
	EvolveAddColumns = "add_columns"
	EvolveNone       = "none"
)

// checkedMapper compiles table t's mapping (its keys under section) as
// far as the configuration says it: a table reading the registry before
// run has asked it for the subject's schema is checked without it (only
// what its columns say, nothing when it has none: run checks them against
// the schema, and so does `config check --probe`), and gives no mapper.
func (c *Config) checkedMapper(t TableConfig, section string) (*mapping.Mapper, error) {
	mc := t.mappingConfig(section, c.schemas)
	unresolved := c.schemas == nil && c.SchemaRegistry.Enabled() && (t.readsRegistry() || t.keyReadsRegistry())
	if unresolved {
		if len(t.Columns) == 0 {
			return nil, nil
		}
		mc.Registry = unresolvedSchemas{}
	}
	m, err := mapping.New(mc, t.PartitionColumns)
	if err == nil {
		err = t.checkUpsert(m, section)
	}
	if unresolved || err != nil {
		return nil, err
	}
	return m, nil
}

// checkUpsert compiles delete_when over m's columns, and checks that
// key_columns name columns a key is made of (a struct, array or map is
// none) and sequence_by one that orders changes.
func (t TableConfig) checkUpsert(m *mapping.Mapper, section string) error {
	if t.WriteMode == WriteUpsert && len(t.KeyColumns) > 0 {
		if _, err := upsert.NewKeys(m.DataSchema(), t.KeyColumns); err != nil {
			return fmt.Errorf("%s.key_columns: %w", section, err)
		}
	}
	if t.DeleteWhen != "" {
		if _, err := m.Where(t.DeleteWhen); err != nil {
			return fmt.Errorf("%s.delete_when: %w", section, err)
		}
	}
	if t.SequenceBy != "" && t.WriteMode == WriteUpsert {
		if _, err := upsert.NewSequence(m.DataSchema(), t.SequenceBy); err != nil {
			return fmt.Errorf("%s.sequence_by: %w", section, err)
		}
	}
	return nil
}

// readsRegistry reports whether the table's records are in the schema
// registry's wire format: Avro or Protobuf without a schema file, or JSON
// Schema.
func (t TableConfig) readsRegistry() bool {
	return (t.Format == mapping.Avro || t.Format == mapping.Protobuf) && t.SchemaFile == "" || t.Format == mapping.JSONSchema
}

// keyReadsRegistry reports whether the table's record keys are in the
// schema registry's wire format.
func (t TableConfig) keyReadsRegistry() bool {
	return t.KeyFormat == mapping.Avro || t.KeyFormat == mapping.JSONSchema || t.KeyFormat == mapping.Protobuf
}

// unresolvedSchemas stands in for the registry where the configuration is
// checked without asking it.
type unresolvedSchemas struct{}

func (unresolvedSchemas) Schema(int) (mapping.WriterSchema, bool, error) {
	return mapping.WriterSchema{}, false, nil
}

// validate checks a flush section (the process's, or a table's own).
func (f FlushConfig) validate(section string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(section+"."+format, args...)) }
	if f.Interval <= 0 {
		bad("interval must be > 0, got %s", f.Interval)
	}
	if f.MaxBytes <= 0 {
		bad("max_bytes must be > 0, got %s", f.MaxBytes)
	}
	if f.RowGroupRows < 0 {
		bad("row_group_rows must be >= 0, got %d", f.RowGroupRows)
	}
	return errs
}

// validate checks a maintenance section (the process's, or a table's own).
func (m MaintenanceConfig) validate(section string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(section+"."+format, args...)) }
	if m.OptimizeEvery < 0 {
		bad("optimize_every must be >= 0 (0 disables), got %s", m.OptimizeEvery)
	}
	if m.OptimizeTargetSize <= 0 {
		bad("optimize_target_size must be > 0, got %s", m.OptimizeTargetSize)
	}
	if m.OptimizeOpenTargetSize <= 0 {
		bad("optimize_open_target_size must be > 0, got %s", m.OptimizeOpenTargetSize)
	}
	if m.OptimizeMinFiles < 2 {
		bad("optimize_min_files must be >= 2, got %d", m.OptimizeMinFiles)
	}
	if m.VacuumEvery < 0 {
		bad("vacuum_every must be >= 0 (0 disables), got %s", m.VacuumEvery)
	}
	if m.VacuumRetain <= 0 {
		bad("vacuum_retain must be > 0, got %s", m.VacuumRetain)
	}
	return errs
}

// checkTableURI accepts what storage.Open accepts, without opening it.
func checkTableURI(uri string) error {
	if !strings.Contains(uri, "://") {
		return nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" {
			return fmt.Errorf("file URI without a path; want file:///abs/path")
		}
	case "s3", "s3a":
		if u.Host == "" {
			return fmt.Errorf("no bucket; want s3://bucket/prefix")
		}
	default:
		return fmt.Errorf("unsupported scheme %q (want s3://, file:// or a path)", u.Scheme)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown %q (want debug, info, warn or error)", s)
}

// validateRegistry checks the schema_registry section.
func validateRegistry(r schemareg.Config) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("schema_registry."+format, args...)) }
	for i, u := range r.URL {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			bad("url[%d]: %q is not an http(s)://host:port URL", i, secret.RedactURL(u))
		}
	}
	if r.Timeout <= 0 {
		bad("timeout must be > 0, got %s", r.Timeout)
	}
	if (r.CertFile == "") != (r.KeyFile == "") {
		bad("cert_file and key_file: give both or neither")
	}
	if r.Password != "" && r.User == "" {
		bad("user: a password without a user")
	}
	if r.Token != "" && (r.User != "" || r.Password != "") {
		bad("token: give a token or a user and password, not both")
	}
	if !r.Enabled() && (r.User != "" || r.Token != "" || r.CAFile != "") {
		bad("url: credentials without a registry to send them to")
	}
	return errs
}
