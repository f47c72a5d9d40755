package delta

import (
	"bytes"
	"slices"
	"strings"

	"github.com/deltaflow/deltaflow/delta/schema"
)

// tableFeature is one table feature this library can recognise in a
// metaData action: the legacy protocol versions that implied it before table
// features existed, and when the metadata makes it active (PROTOCOL.md
// "Active Features").
type tableFeature struct {
	name         string
	legacyReader int32  // reader version that implies it; 0 for writer-only features
	legacyWriter int32  // writer version that implies it; 0 when only reader 3 / writer 7 can
	reader       bool   // a reader feature (listed in readerFeatures and writerFeatures)
	preview      string // the name of its preview, which supports it too where listed
	active       func(m *Metadata, schema *StructType) bool
}

// tableFeatures are the features a metaData change can make active, with the
// legacy versions PROTOCOL.md "Writer Version Requirements" and "Reader
// Version Requirements" give them.
var tableFeatures = []tableFeature{
	{name: "appendOnly", legacyWriter: 2, active: func(m *Metadata, _ *StructType) bool {
		return strings.EqualFold(m.Configuration["delta.appendOnly"], "true")
	}},
	// Delta Spark counts a NOT NULL column as an invariant
	// (Invariants.getFromSchema): a writer 7 table with one must list the
	// feature, or Spark refuses to read it (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH).
	{name: "invariants", legacyWriter: 2, active: func(_ *Metadata, s *StructType) bool {
		return fieldMetadataHas(s, "delta.invariants") || anyType(s, func(t DataType) bool {
			st, ok := t.(*StructType)
			return ok && slices.ContainsFunc(st.Fields, func(f StructField) bool { return !f.Nullable })
		})
	}},
	{name: "checkConstraints", legacyWriter: 3, active: func(m *Metadata, _ *StructType) bool {
		for k := range m.Configuration {
			if strings.HasPrefix(k, "delta.constraints.") {
				return true
			}
		}
		return false
	}},
	{name: "changeDataFeed", legacyWriter: 4, active: func(m *Metadata, _ *StructType) bool {
		return strings.EqualFold(m.Configuration["delta.enableChangeDataFeed"], "true")
	}},
	{name: "generatedColumns", legacyWriter: 4, active: func(_ *Metadata, s *StructType) bool {
		return fieldMetadataHas(s, "delta.generationExpression")
	}},
	{name: "columnMapping", legacyReader: 2, legacyWriter: 5, reader: true, active: func(m *Metadata, _ *StructType) bool {
		mode := m.Configuration["delta.columnMapping.mode"]
		return mode != "" && mode != "none"
	}},
	{name: "identityColumns", legacyWriter: 6, active: func(_ *Metadata, s *StructType) bool {
		return fieldMetadataHas(s, "delta.identity.start")
	}},
	{name: "timestampNtz", reader: true, active: func(_ *Metadata, s *StructType) bool {
		return anyType(s, func(t DataType) bool { return t == TimestampNTZ })
	}},
	{name: "variantType", reader: true, active: func(_ *Metadata, s *StructType) bool {
		return anyType(s, func(t DataType) bool { return t == Variant })
	}},
	// A table that allows type changes, or has had some, must list
	// typeWidening; one Delta 3.2 or 3.3 enabled lists the preview.
	{name: "typeWidening", preview: "typeWidening-preview", reader: true, active: func(m *Metadata, s *StructType) bool {
		return strings.EqualFold(m.Configuration[schema.EnableTypeWidening], "true") || fieldMetadataHas(s, schema.TypeChangesKey)
	}},
	// A table that allows new deletion vectors (an upsert table) must
	// list the feature before any is written.
	{name: "deletionVectors", reader: true, active: func(m *Metadata, _ *StructType) bool {
		return strings.EqualFold(m.Configuration["delta.enableDeletionVectors"], "true")
	}},
}

// anyType reports whether match holds for t or for any type nested in it.
func anyType(t DataType, match func(DataType) bool) bool {
	if match(t) {
		return true
	}
	switch t := t.(type) {
	case *StructType:
		return slices.ContainsFunc(t.Fields, func(f StructField) bool { return anyType(f.Type, match) })
	case *ArrayType:
		return anyType(t.ElementType, match)
	case *MapType:
		return anyType(t.KeyType, match) || anyType(t.ValueType, match)
	}
	return false
}

// fieldMetadataHas reports whether any field, at any depth, has key in its
// metadata.
func fieldMetadataHas(t DataType, key string) bool {
	quoted := []byte(`"` + key + `"`)
	return anyType(t, func(t DataType) bool {
		st, ok := t.(*StructType)
		return ok && slices.ContainsFunc(st.Fields, func(f StructField) bool { return bytes.Contains(f.Metadata, quoted) })
	})
}

// supports reports whether p supports f: listed as a table feature at
// reader 3 / writer 7, or implied by a legacy version below them.
func (p *Protocol) supports(f *tableFeature) bool {
	return p.writerSupports(f) && (!f.reader || p.readerSupports(f))
}

func (p *Protocol) writerSupports(f *tableFeature) bool {
	if p.MinWriterVersion == 7 {
		return slices.Contains(p.WriterFeatures, f.listedIn(p))
	}
	return f.legacyWriter > 0 && p.MinWriterVersion >= f.legacyWriter
}

func (p *Protocol) readerSupports(f *tableFeature) bool {
	if p.MinReaderVersion == 3 {
		return slices.Contains(p.ReaderFeatures, f.listedIn(p))
	}
	return f.legacyReader > 0 && p.MinReaderVersion >= f.legacyReader
}

// listedIn is the name p lists f by: its preview's where p lists that and
// not f, else f's own (what an upgrade adds).
func (f *tableFeature) listedIn(p *Protocol) string {
	if f.preview != "" && slices.Contains(p.WriterFeatures, f.preview) && !slices.Contains(p.WriterFeatures, f.name) {
		return f.preview
	}
	return f.name
}

// legacyFeatures are the features a protocol below reader 3 / writer 7
// implies by its versions alone.
func (p *Protocol) legacyFeatures() (reader, writer []string) {
	for i := range tableFeatures {
		f := &tableFeatures[i]
		if p.MinWriterVersion < 7 && p.writerSupports(f) {
			writer = append(writer, f.name)
		}
		if f.reader && p.MinReaderVersion < 3 && p.readerSupports(f) {
			reader = append(reader, f.name)
			writer = append(writer, f.name) // reader features are writer features too
		}
	}
	return reader, writer
}

// requiredProtocol returns the protocol a commit carrying meta must leave the
// table with, given its current protocol cur, and whether that differs from
// cur. Readers refuse a table whose metadata uses a feature its protocol does
// not support (delta-kernel rejects a timestamp_ntz column at reader 1), so a
// metaData change that activates a feature must upgrade the protocol in the
// same commit.
//
// The upgrade goes to writer 7 (and reader 3 when a reader feature is
// needed) and, as PROTOCOL.md "Table Features for New and Existing Tables"
// requires of an existing table, keeps every feature the old versions
// implied, since the table's history may use them. A new table (history
// false) has no history, so it gets only the features its metadata uses.
func requiredProtocol(cur *Protocol, meta *Metadata, history bool) (*Protocol, bool, error) {
	schema, err := meta.Schema()
	if err != nil {
		return nil, false, err
	}
	var active []*tableFeature
	upgrade := false
	for i := range tableFeatures {
		if f := &tableFeatures[i]; f.active(meta, schema) {
			active = append(active, f)
			upgrade = upgrade || !cur.supports(f)
		}
	}
	if !upgrade {
		return cur, false, nil
	}
	// At writer 7 only the listed features are supported: list every
	// active one, not just those the old protocol lacked.
	next := &Protocol{MinReaderVersion: cur.MinReaderVersion, MinWriterVersion: 7}
	var readerFeatures, writerFeatures []string
	if history {
		readerFeatures, writerFeatures = cur.legacyFeatures()
	}
	readerFeatures = append(readerFeatures, cur.ReaderFeatures...)
	writerFeatures = append(writerFeatures, cur.WriterFeatures...)
	for _, f := range active {
		writerFeatures = append(writerFeatures, f.listedIn(cur))
		if f.reader {
			readerFeatures = append(readerFeatures, f.listedIn(cur))
			if !cur.readerSupports(f) {
				next.MinReaderVersion = 3
			}
		}
	}
	if next.MinReaderVersion == 3 {
		slices.Sort(readerFeatures)
		next.ReaderFeatures = slices.Compact(readerFeatures)
	}
	slices.Sort(writerFeatures)
	next.WriterFeatures = slices.Compact(writerFeatures)
	return next, true, nil
}

// withRequiredProtocol checks a commit's metaData action, if any, against
// the protocol the table will have after it (the commit's own protocol
// action, else the snapshot's) and returns the actions with the protocol
// upgraded where the metadata needs it: the upgraded protocol replaces the
// commit's protocol action, or is added before the metaData action. A
// protocol this library could not then write is refused.
func withRequiredProtocol(s *Snapshot, actions []Action) ([]Action, error) {
	metaAt, protoAt := -1, -1
	for i := range actions {
		switch {
		case actions[i].MetaData != nil:
			metaAt = i
		case actions[i].Protocol != nil:
			protoAt = i
		}
	}
	if metaAt < 0 {
		return actions, nil
	}
	cur := s.protocol // nil only for a new table, whose commit carries its protocol
	if protoAt >= 0 {
		cur = actions[protoAt].Protocol
	}
	next, changed, err := requiredProtocol(cur, actions[metaAt].MetaData, s.version >= 0)
	if err != nil || !changed {
		return actions, err
	}
	// The table as it will be: refused if this library could not append to it.
	after := *s
	after.protocol, after.metadata, after.schema, after.statCols = next, actions[metaAt].MetaData, nil, nil
	if err := after.Check(OpAppend); err != nil {
		return nil, err
	}
	out := slices.Clone(actions)
	if protoAt >= 0 {
		out[protoAt] = Action{Protocol: next}
		return out, nil
	}
	return slices.Insert(out, metaAt, Action{Protocol: next}), nil
}
