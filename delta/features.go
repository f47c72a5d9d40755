package delta

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"
)

// Op is a table operation that table features can refuse.
type Op string

// The operations gated by table features.
const (
	OpRead     Op = "read"     // snapshot, inspect, cat, verify
	OpAppend   Op = "append"   // blind appends and the metadata commits around them
	OpOptimize Op = "optimize" // compaction: data rearranged, dataChange=false
	OpVacuum   Op = "vacuum"   // deleting unreferenced files
	OpRestore  Op = "restore"  // RESTORE: files of an older version re-added, its metadata back
)

// featureRule is what this library does about one table feature. The
// protocol separates supported from active ("supported does not imply
// active"): a rule refuses an operation only while its feature is active.
type featureRule struct {
	// read: the reader side is implemented (only reader features need it).
	read bool
	// active reports whether the feature is in use on the table; nil means
	// whenever it is supported. detail, if not empty, says where.
	active func(s *Snapshot) (ok bool, detail string)
	// refuse lists the write operations refused while the feature is active,
	// for the reason given (a refusal names both).
	refuse []Op
	reason string
}

var allWrites = []Op{OpAppend, OpOptimize, OpVacuum, OpRestore}

// unknownFeature is the reason for refusing a feature featureRules lacks.
const unknownFeature = "not implemented by deltaflow"

// featureRules covers every feature of PROTOCOL.md this library knows of.
// A feature missing here is refused for every operation it could affect.
// VACUUM only lists and deletes files no version within the retention
// references: a feature refuses it only if it asks something of VACUUM
// (vacuumProtocolCheck asks that VACUUM check the writer features, which
// Vacuum does through Check like every write).
var featureRules = map[string]featureRule{
	// appendOnly is honoured by checkActions: no dataChange removes.
	"appendOnly": {active: configTrue("delta.appendOnly")},
	// invariants are not evaluated: appends are refused while one exists;
	// compaction only moves rows that already satisfied them.
	"invariants": {active: fieldMetadataKey("delta.invariants"), refuse: []Op{OpAppend},
		reason: "column invariants are not evaluated"},
	"checkConstraints": {active: configPrefix("delta.constraints."), refuse: []Op{OpAppend},
		reason: "CHECK constraints are not evaluated"},
	"generatedColumns": {active: fieldMetadataKey("delta.generationExpression"), refuse: []Op{OpAppend},
		reason: "generation expressions are not evaluated"},
	"allowColumnDefaults": {active: fieldMetadataKey("CURRENT_DEFAULT"), refuse: []Op{OpAppend},
		reason: "column defaults are not evaluated"},
	// Appends write only data files, which CDF allows; OPTIMIZE is
	// dataChange=false and needs no change data either.
	"changeDataFeed": {active: configTrue("delta.enableChangeDataFeed")},
	// Domains are preserved through replay and checkpoints.
	"domainMetadata":      {},
	"timestampNtz":        {read: true},
	"vacuumProtocolCheck": {read: true},
	// Reads apply DVs; appends write none; OPTIMIZE rewrites files with
	// their DVs applied; VACUUM keeps DV files.
	"deletionVectors": {read: true, active: deletionVectorsOn},
	// Reads resolve physical names; writes use physical names and field ids.
	"columnMapping": {read: true, active: columnMappingOn},
	// V2 checkpoints and sidecars are read, and written where the table
	// asks (delta.checkpointPolicy=v2), else classic V1 ones.
	"v2Checkpoint": {read: true},
	// Commits write commitInfo.inCommitTimestamp first.
	"inCommitTimestamp":         {active: inCommitTimestampsOn},
	"inCommitTimestamp-preview": {active: inCommitTimestampsOn},
	// Appends need no clustering. OPTIMIZE bin-packs only unclustered files
	// (no clusteringProvider) into unclustered files, so the files a
	// clustering implementation made stay as it made them (PlanOptimize).
	"clustering": {},
	// Commits assign fresh row IDs and commit versions; OPTIMIZE keeps the
	// stable ones of an enabled table in its materialized columns
	// (rowtracking.go).
	"rowTracking": {active: rowTrackingOn},
	// OPTIMIZE copies identity values as they are. RESTORE would have to
	// keep the latest high-water marks in the restored schema, as Spark
	// does, or later rows could repeat identity values.
	"identityColumns": {active: fieldMetadataKey("delta.identity.start"), refuse: []Op{OpAppend, OpRestore},
		reason: "identity values and their high-water marks are not maintained"},
	// Variants are read unshredded or shredded, and written unshredded,
	// which every table with the type allows (shredding is optional).
	"variantType":              {read: true},
	"variantShredding":         {read: true},
	"variantShredding-preview": {read: true},
	// Reads convert old files' values to the widened types; appends and
	// OPTIMIZE write the current types; EnsureSchema widens a column where
	// the table allows it.
	"typeWidening":         {read: true, active: typeWideningOn},
	"typeWidening-preview": {read: true, active: typeWideningOn},
	// Writers write partition values into every new data file
	// (Snapshot.ApplyWriterOptions).
	"materializePartitionColumns": {},
	"icebergCompatV1": {active: configTrue("delta.enableIcebergCompatV1"), refuse: allWrites,
		reason: "Iceberg compatibility is not maintained"},
	"icebergCompatV2": {active: configTrue("delta.enableIcebergCompatV2"), refuse: allWrites,
		reason: "Iceberg compatibility is not maintained"},
	// Such a table is committed to, and read, through its catalog: a
	// client of the storage alone sees only the published commits.
	"catalogManaged": {refuse: allWrites, reason: "commits go through the table's catalog, which deltaflow does not speak to"},
}

// readerFeatureSet is the reader features the protocol supports:
// readerFeatures at reader version 3, else what the legacy version implies
// (columnMapping at 2).
func (p *Protocol) readerFeatureSet() []string {
	if p.MinReaderVersion >= 3 {
		return p.ReaderFeatures
	}
	reader, _ := p.legacyFeatures()
	return reader
}

// writerFeatureSet is writerFeatures at writer version 7, or the features a
// legacy writer version implies.
func (p *Protocol) writerFeatureSet() []string {
	if p.MinWriterVersion >= 7 {
		return p.WriterFeatures
	}
	_, writer := p.legacyFeatures()
	return writer
}

// Check refuses op on this table when a table feature it needs is not
// implemented here, or is active and not honoured by op. The error is an
// *UnsupportedError naming the features and the operation.
func (s *Snapshot) Check(op Op) error {
	p := s.protocol
	if p.MinReaderVersion > 3 {
		return &UnsupportedError{Op: op, Write: op != OpRead, Version: p.MinReaderVersion}
	}
	if p.MinWriterVersion > 7 && op != OpRead {
		return &UnsupportedError{Op: op, Write: true, Version: p.MinWriterVersion}
	}
	var bad, details []string
	refuse := func(f, reason, where string) {
		if slices.Contains(bad, f) {
			return
		}
		bad = append(bad, f)
		d := f + ": " + reason
		if where != "" {
			d += " (" + where + ")"
		}
		details = append(details, d)
	}
	// Writers read the table first: every operation needs the reader side.
	for _, f := range p.readerFeatureSet() {
		r, ok := featureRules[f]
		if ok && r.read {
			continue
		}
		active, where := true, ""
		if ok && r.active != nil {
			active, where = r.active(s)
		}
		if active {
			refuse(f, cmp.Or(r.reason, unknownFeature), where)
		}
	}
	if op != OpRead {
		for _, f := range p.writerFeatureSet() {
			r, ok := featureRules[f]
			if !ok {
				refuse(f, unknownFeature, "")
				continue
			}
			if !slices.Contains(r.refuse, op) {
				continue
			}
			active, where := true, ""
			if r.active != nil {
				active, where = r.active(s)
			}
			if active {
				refuse(f, r.reason, where)
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &UnsupportedError{Op: op, Write: op != OpRead, Version: p.MinReaderVersion, Features: bad, Detail: strings.Join(details, "; ")}
}

// ActiveFeatures lists the table features supported by the protocol and
// active on the table, reader features first.
func (s *Snapshot) ActiveFeatures() []string {
	var out []string
	for _, f := range append(slices.Clone(s.protocol.readerFeatureSet()), s.protocol.writerFeatureSet()...) {
		if slices.Contains(out, f) {
			continue
		}
		if r, ok := featureRules[f]; ok && r.active != nil {
			if on, _ := r.active(s); !on {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// configTrue: active when the table property is "true".
func configTrue(key string) func(*Snapshot) (bool, string) {
	return func(s *Snapshot) (bool, string) {
		return strings.EqualFold(s.metadata.Configuration[key], "true"), ""
	}
}

// configPrefix: active when a table property starts with prefix; detail
// names them (without the prefix).
func configPrefix(prefix string) func(*Snapshot) (bool, string) {
	return func(s *Snapshot) (bool, string) {
		var names []string
		for k := range s.metadata.Configuration {
			if name, ok := strings.CutPrefix(k, prefix); ok {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return len(names) > 0, strings.Join(names, ", ")
	}
}

// fieldMetadataKey: active when a column (at any depth) has key in its
// metadata; detail names the columns.
func fieldMetadataKey(key string) func(*Snapshot) (bool, string) {
	return func(s *Snapshot) (bool, string) {
		st, err := s.Schema()
		if err != nil {
			return true, "unreadable schema"
		}
		var cols []string
		walkFields(st, "", func(path string, f *StructField) {
			if metadataHas(f.Metadata, key) {
				cols = append(cols, path)
			}
		})
		return len(cols) > 0, strings.Join(cols, ", ")
	}
}

// metadataHas reports whether the field metadata object has the key.
func metadataHas(md json.RawMessage, key string) bool {
	if !bytes.Contains(md, []byte(key)) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(md, &m) != nil {
		return true // cannot tell: assume the worst
	}
	_, ok := m[key]
	return ok
}

// walkFields calls fn for every struct field in t, depth first, with its
// dotted path.
func walkFields(t DataType, prefix string, fn func(path string, f *StructField)) {
	switch t := t.(type) {
	case *StructType:
		for i := range t.Fields {
			f := &t.Fields[i]
			path := prefix + f.Name
			fn(path, f)
			walkFields(f.Type, path+".", fn)
		}
	case *ArrayType:
		walkFields(t.ElementType, prefix, fn)
	case *MapType:
		walkFields(t.KeyType, prefix, fn)
		walkFields(t.ValueType, prefix, fn)
	}
}

// opOf classifies a commit by its operation name: OPTIMIZE, VACUUM START
// and VACUUM END are maintenance; everything else this library commits
// (WRITE, STREAMING UPDATE, CHANGE COLUMN, ...) goes with appending.
func opOf(name string) Op {
	switch {
	case name == "OPTIMIZE":
		return OpOptimize
	case strings.HasPrefix(name, "VACUUM"):
		return OpVacuum
	case name == "RESTORE":
		return OpRestore
	}
	return OpAppend
}

// deletionVectorsOn: new DVs may be written (delta.enableDeletionVectors)
// or a live file has one.
func deletionVectorsOn(s *Snapshot) (bool, string) {
	if strings.EqualFold(s.metadata.Configuration["delta.enableDeletionVectors"], "true") {
		return true, ""
	}
	for _, a := range s.files {
		if a.DeletionVector != nil {
			return true, ""
		}
	}
	return false, ""
}

// columnMappingOn: delta.columnMapping.mode is name or id.
func columnMappingOn(s *Snapshot) (bool, string) {
	return s.ColumnMappingMode() != "none", s.ColumnMappingMode()
}

// inCommitTimestampsOn: delta.enableInCommitTimestamps (or its -preview
// form from delta-spark 3.2) is true.
func inCommitTimestampsOn(s *Snapshot) (bool, string) {
	c := s.metadata.Configuration
	return strings.EqualFold(c["delta.enableInCommitTimestamps"], "true") ||
		strings.EqualFold(c["delta.enableInCommitTimestamps-preview"], "true"), ""
}

// rowTrackingOn: once supported, writers must assign row ids unless the
// table suspends it (delta.rowTrackingSuspended).
func rowTrackingOn(s *Snapshot) (bool, string) {
	return !strings.EqualFold(s.metadata.Configuration["delta.rowTrackingSuspended"], "true"), ""
}

// typeWideningOn: enabled by property, or a column carries type changes.
func typeWideningOn(s *Snapshot) (bool, string) {
	c := s.metadata.Configuration
	if strings.EqualFold(c["delta.enableTypeWidening"], "true") {
		return true, ""
	}
	return fieldMetadataKey(typeChangesKey)(s)
}
