package delta

import (
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/deltaflow/deltaflow/delta/internal/pqnode"
)

// The checkpoint's columns are declared once per action type, below: each
// field's name, Parquet type and place in the action. The declarations make
// the schema checkpoints are written with, the encoder of their rows and the
// binding and decoding of any writer's checkpoint, so adding a field to an
// action is one line here.

// ckActions are the actions of a checkpoint row, in the order of Spark's
// checkpoint schema; sidecar and checkpointMetadata are only read.
var ckActions = []ckAction{
	actionOf("txn", func(a *Action) **Txn { return &a.Txn }, requirePath(func(t *Txn) string { return t.AppID }, "txn action without appId"),
		strField("appId", func(t *Txn) *string { return &t.AppID }),
		i64Field("version", func(t *Txn) *int64 { return &t.Version }),
		optI64Field("lastUpdated", func(t *Txn) **int64 { return &t.LastUpdated }),
	),
	actionOf("add", func(a *Action) **Add { return &a.Add }, requirePath(func(f *Add) string { return f.Path }, "add action without path"),
		addFields...,
	),
	actionOf("remove", func(a *Action) **Remove { return &a.Remove }, requirePath(func(f *Remove) string { return f.Path }, "remove action without path"),
		removeFields...,
	),
	actionOf("metaData", func(a *Action) **Metadata { return &a.MetaData }, nil,
		strField("id", func(m *Metadata) *string { return &m.ID }),
		strPtrField("name", func(m *Metadata) **string { return &m.Name }),
		strPtrField("description", func(m *Metadata) **string { return &m.Description }),
		groupField("format", func(m *Metadata) *Format { return &m.Format },
			strField("provider", func(f *Format) *string { return &f.Provider }),
			mapField("options", func(f *Format) *map[string]string { return &f.Options }, false),
		),
		strField("schemaString", func(m *Metadata) *string { return &m.SchemaString }),
		listField("partitionColumns", func(m *Metadata) *[]string { return &m.PartitionColumns }, false),
		mapField("configuration", func(m *Metadata) *map[string]string { return &m.Configuration }, false),
		optI64Field("createdTime", func(m *Metadata) **int64 { return &m.CreatedTime }),
	),
	actionOf("protocol", func(a *Action) **Protocol { return &a.Protocol }, nil,
		i32Field("minReaderVersion", func(p *Protocol) *int32 { return &p.MinReaderVersion }),
		i32Field("minWriterVersion", func(p *Protocol) *int32 { return &p.MinWriterVersion }),
		listField("readerFeatures", func(p *Protocol) *[]string { return &p.ReaderFeatures }, true),
		listField("writerFeatures", func(p *Protocol) *[]string { return &p.WriterFeatures }, true),
	),
	actionOf("domainMetadata", func(a *Action) **DomainMetadata { return &a.DomainMetadata }, nil,
		strField("domain", func(d *DomainMetadata) *string { return &d.Domain }),
		strField("configuration", func(d *DomainMetadata) *string { return &d.Configuration }),
		boolField("removed", func(d *DomainMetadata) *bool { return &d.Removed }),
	),
	readOnly(actionOf("sidecar", func(a *Action) **Sidecar { return &a.Sidecar }, requirePath(func(s *Sidecar) string { return s.Path }, "sidecar without path"),
		strField("path", func(s *Sidecar) *string { return &s.Path }),
		i64Field("sizeInBytes", func(s *Sidecar) *int64 { return &s.SizeInBytes }),
		i64Field("modificationTime", func(s *Sidecar) *int64 { return &s.ModificationTime }),
	)),
	readOnly(actionOf("checkpointMetadata", func(a *Action) **CheckpointMetadata { return &a.CheckpointMetadata }, nil,
		i64Field("version", func(c *CheckpointMetadata) *int64 { return &c.Version }),
	)),
}

// The file actions, which V2 checkpoint sidecars hold alone.
var (
	dvFields = []ckField[DeletionVector]{
		strField("storageType", func(d *DeletionVector) *string { return &d.StorageType }),
		strField("pathOrInlineDv", func(d *DeletionVector) *string { return &d.PathOrInlineDv }),
		optI32Field("offset", func(d *DeletionVector) **int32 { return &d.Offset }),
		i32Field("sizeInBytes", func(d *DeletionVector) *int32 { return &d.SizeInBytes }),
		i64Field("cardinality", func(d *DeletionVector) *int64 { return &d.Cardinality }),
		optI64Field("maxRowIndex", func(d *DeletionVector) **int64 { return &d.MaxRowIndex }),
	}
	addFields = []ckField[Add]{
		strField("path", func(f *Add) *string { return &f.Path }),
		nullableMapField("partitionValues", func(f *Add) *map[string]*string { return &f.PartitionValues }, false), // required: {} when empty
		i64Field("size", func(f *Add) *int64 { return &f.Size }),
		i64Field("modificationTime", func(f *Add) *int64 { return &f.ModificationTime }),
		boolField("dataChange", func(f *Add) *bool { return &f.DataChange }),
		mapField("tags", func(f *Add) *map[string]string { return &f.Tags }, true),
		optGroupField("deletionVector", func(f *Add) **DeletionVector { return &f.DeletionVector }, dvFields...),
		optI64Field("baseRowId", func(f *Add) **int64 { return &f.BaseRowID }),
		optI64Field("defaultRowCommitVersion", func(f *Add) **int64 { return &f.DefaultRowCommitVersion }),
		strPtrField("clusteringProvider", func(f *Add) **string { return &f.ClusteringProvider }),
		statsField("stats", func(f *Add) *string { return &f.Stats }),
	}
	removeFields = []ckField[Remove]{
		strField("path", func(f *Remove) *string { return &f.Path }),
		optI64Field("deletionTimestamp", func(f *Remove) **int64 { return &f.DeletionTimestamp }),
		boolField("dataChange", func(f *Remove) *bool { return &f.DataChange }),
		optBoolField("extendedFileMetadata", func(f *Remove) **bool { return &f.ExtendedFileMetadata }),
		nullableMapField("partitionValues", func(f *Remove) *map[string]*string { return &f.PartitionValues }, true),
		optI64Field("size", func(f *Remove) **int64 { return &f.Size }),
		optGroupField("deletionVector", func(f *Remove) **DeletionVector { return &f.DeletionVector }, dvFields...),
		optI64Field("baseRowId", func(f *Remove) **int64 { return &f.BaseRowID }),
		optI64Field("defaultRowCommitVersion", func(f *Remove) **int64 { return &f.DefaultRowCommitVersion }),
		// Spark 3.5 writes neither into checkpoints; other writers may.
		readOnlyField(statsField("stats", func(f *Remove) *string { return &f.Stats })),
		readOnlyField(mapField("tags", func(f *Remove) *map[string]string { return &f.Tags }, true)),
	}
)

// ckAction is one action type's column group in a checkpoint row.
type ckAction struct {
	name     string
	readOnly bool // bound when reading, not written
	node     parquet.Node
	leaves   int
	encode   func(e *rowEncoder, a *Action) // the group, or its nulls when a lacks the action
	// bind finds the action's columns in a file; decode calls fn with the
	// action of a row that holds one.
	bind func(b *binder, root *parquet.Column) (decode func(rv [][]parquet.Value, fn func(*Action) error) error)
}

// ckField is one field of S, an action or a struct inside one. encode writes
// its leaves present at definition level def (S itself present at def-1);
// bind finds its columns under parent and returns how a row sets it in S.
type ckField[S any] struct {
	name     string
	readOnly bool
	node     parquet.Node
	leaves   int
	encode   func(e *rowEncoder, def int, s *S)
	bind     func(b *binder, parent *parquet.Column) func(rv [][]parquet.Value, s *S) error
}

func readOnly(a ckAction) ckAction { a.readOnly = true; return a }

func readOnlyField[S any](f ckField[S]) ckField[S] { f.readOnly = true; return f }

// requirePath refuses an action whose key field (path, appId) is empty.
func requirePath[T any](key func(*T) string, msg string) func(*T) error {
	return func(t *T) error {
		if key(t) == "" {
			return errors.New(msg)
		}
		return nil
	}
}

// written returns the fields a checkpoint writes.
func written[S any](fields []ckField[S]) []ckField[S] {
	var out []ckField[S]
	for _, f := range fields {
		if !f.readOnly {
			out = append(out, f)
		}
	}
	return out
}

// structNode is the optional group of fields, in their order.
func structNode[S any](fields []ckField[S]) (node parquet.Node, leaves int) {
	var fs []parquet.Field
	for _, f := range written(fields) {
		fs = append(fs, pqnode.Field(f.name, f.node))
		leaves += f.leaves
	}
	return parquet.Optional(pqnode.Group(fs...)), leaves
}

// bindFields binds fields under c and returns the decoder of all of them.
func bindFields[S any](b *binder, c *parquet.Column, fields []ckField[S]) func(rv [][]parquet.Value, s *S) error {
	decoders := make([]func([][]parquet.Value, *S) error, len(fields))
	for i, f := range fields {
		decoders[i] = f.bind(b, c)
	}
	return func(rv [][]parquet.Value, s *S) error {
		for i, d := range decoders {
			if err := d(rv, s); err != nil {
				return fmt.Errorf("%s: %w", fields[i].name, err)
			}
		}
		return nil
	}
}

// actionOf declares the action type T, held in the Action field p, with
// its fields; check, if set, refuses a decoded action.
func actionOf[T any](name string, p func(*Action) **T, check func(*T) error, fields ...ckField[T]) ckAction {
	out := written(fields)
	node, leaves := structNode(fields)
	return ckAction{name: name, node: node, leaves: leaves,
		encode: func(e *rowEncoder, a *Action) {
			t := *p(a)
			if t == nil {
				e.null(leaves, 0)
				return
			}
			for _, f := range out {
				f.encode(e, 2, t)
			}
		},
		bind: func(b *binder, root *parquet.Column) func([][]parquet.Value, func(*Action) error) error {
			c := child(root, name)
			g := b.group(c)
			decode := bindFields(b, c, fields)
			return func(rv [][]parquet.Value, fn func(*Action) error) error {
				if !g.present(rv) {
					return nil
				}
				t := new(T)
				if err := decode(rv, t); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if check != nil {
					if err := check(t); err != nil {
						return err
					}
				}
				var a Action
				*p(&a) = t
				return fn(&a)
			}
		},
	}
}

// leafField is a field of one primitive column of the given kinds.
func leafField[S any](name string, node parquet.Node, kinds int, encode func(e *rowEncoder, def int, s *S),
	decode func(l ckLeaf, rv [][]parquet.Value, s *S) error) ckField[S] {
	return ckField[S]{name: name, node: node, leaves: 1, encode: encode,
		bind: func(b *binder, parent *parquet.Column) func([][]parquet.Value, *S) error {
			l := b.leaf(parent, name, kinds)
			return func(rv [][]parquet.Value, s *S) error { return decode(l, rv, s) }
		}}
}

// strField is a string written always; null reads as "".
func strField[S any](name string, p func(*S) *string) ckField[S] {
	return leafField(name, pqString, kindString,
		func(e *rowEncoder, def int, s *S) { e.str(def, *p(s)) },
		func(l ckLeaf, rv [][]parquet.Value, s *S) error { *p(s) = l.str(rv); return nil })
}

// statsField is a string written as null when empty (add.stats).
func statsField[S any](name string, p func(*S) *string) ckField[S] {
	return leafField(name, pqString, kindString,
		func(e *rowEncoder, def int, s *S) { e.optStr(def, *p(s), *p(s) == "") },
		func(l ckLeaf, rv [][]parquet.Value, s *S) error { *p(s) = l.str(rv); return nil })
}

// strPtrField is an optional string: nil is null.
func strPtrField[S any](name string, p func(*S) **string) ckField[S] {
	return leafField(name, pqString, kindString,
		func(e *rowEncoder, def int, s *S) { e.optStrPtr(def, *p(s)) },
		func(l ckLeaf, rv [][]parquet.Value, s *S) error { *p(s) = l.strPtr(rv); return nil })
}

func i64Field[S any](name string, p func(*S) *int64) ckField[S] {
	return leafField(name, pqInt64, kindInt,
		func(e *rowEncoder, def int, s *S) { e.i64(def, *p(s)) },
		func(l ckLeaf, rv [][]parquet.Value, s *S) error { *p(s) = l.i64(rv); return nil })
}

func optI64Field[S any](name string, p func(*S) **int64) ckField[S] {
	return leafField(name, pqInt64, kindInt,
		func(e *rowEncoder, def int, s *S) { e.optI64(def, *p(s)) },
		func(l ckLeaf, rv [][]parquet.Value, s *S) error { *p(s) = l.i64Ptr(rv); return nil })
}

// i32Field is an INT32; a wider value read from another writer is an error.
func i32Field[S any](name string, p func(*S) *int32) ckField[S] {
	return leafField(name, pqInt32, kindInt,
		func(e *rowEncoder, def int, s *S) { e.i32(def, *p(s)) },
		func(l ckLeaf, rv [][]parquet.Value, s *S) (err error) { *p(s), err = l.i32(rv); return err })
}

func optI32Field[S any](name string, p func(*S) **int32) ckField[S] {
	return leafField(name, pqInt32, kindInt,
		func(e *rowEncoder, def int, s *S) {
			if v := *p(s); v == nil {
				e.null(1, def-1)
			} else {
				e.i32(def, *v)
			}
		},
		func(l ckLeaf, rv [][]parquet.Value, s *S) (err error) { *p(s), err = l.i32Ptr(rv); return err })
}

func boolField[S any](name string, p func(*S) *bool) ckField[S] {
	return leafField(name, pqBool, kindBool,
		func(e *rowEncoder, def int, s *S) { e.boolean(def, *p(s)) },
		func(l ckLeaf, rv [][]parquet.Value, s *S) error { *p(s) = l.boolean(rv); return nil })
}

func optBoolField[S any](name string, p func(*S) **bool) ckField[S] {
	return leafField(name, pqBool, kindBool,
		func(e *rowEncoder, def int, s *S) {
			if v := *p(s); v == nil {
				e.null(1, def-1)
			} else {
				e.boolean(def, *v)
			}
		},
		func(l ckLeaf, rv [][]parquet.Value, s *S) error { *p(s) = l.boolPtr(rv); return nil })
}

// mapField is a MAP<string,string> whose null values read as ""; with
// nilIsNull a nil map is written as null, else as an empty map.
func mapField[S any](name string, p func(*S) *map[string]string, nilIsNull bool) ckField[S] {
	return ckField[S]{name: name, node: pqMap, leaves: 2,
		encode: func(e *rowEncoder, def int, s *S) { m := *p(s); strMap(e, def, m, nilIsNull && m == nil) },
		bind: func(b *binder, parent *parquet.Column) func([][]parquet.Value, *S) error {
			m := b.mapOf(parent, name)
			return func(rv [][]parquet.Value, s *S) (err error) { *p(s), err = m.plain(rv); return err }
		}}
}

// nullableMapField is a MAP<string,string> whose null values stay nil
// (partitionValues).
func nullableMapField[S any](name string, p func(*S) *map[string]*string, nilIsNull bool) ckField[S] {
	return ckField[S]{name: name, node: pqMap, leaves: 2,
		encode: func(e *rowEncoder, def int, s *S) { m := *p(s); strMap(e, def, m, nilIsNull && m == nil) },
		bind: func(b *binder, parent *parquet.Column) func([][]parquet.Value, *S) error {
			m := b.mapOf(parent, name)
			return func(rv [][]parquet.Value, s *S) (err error) { *p(s), err = m.nullable(rv); return err }
		}}
}

// listField is a LIST<string>; with nilIsNull a nil list is written as
// null, else as an empty list.
func listField[S any](name string, p func(*S) *[]string, nilIsNull bool) ckField[S] {
	return ckField[S]{name: name, node: pqList, leaves: 1,
		encode: func(e *rowEncoder, def int, s *S) { l := *p(s); e.strList(def, l, nilIsNull && l == nil) },
		bind: func(b *binder, parent *parquet.Column) func([][]parquet.Value, *S) error {
			l := b.listOf(parent, name)
			return func(rv [][]parquet.Value, s *S) error { *p(s) = l.strings(rv); return nil }
		}}
}

// groupField is a struct field G always written (metaData.format); read
// only when present.
func groupField[S, G any](name string, p func(*S) *G, fields ...ckField[G]) ckField[S] {
	node, leaves := structNode(fields)
	out := written(fields)
	return ckField[S]{name: name, node: node, leaves: leaves,
		encode: func(e *rowEncoder, def int, s *S) {
			for _, f := range out {
				f.encode(e, def+1, p(s))
			}
		},
		bind: func(b *binder, parent *parquet.Column) func([][]parquet.Value, *S) error {
			c := child(parent, name)
			g := b.group(c)
			decode := bindFields(b, c, fields)
			return func(rv [][]parquet.Value, s *S) error {
				if !g.present(rv) {
					return nil
				}
				var v G
				if err := decode(rv, &v); err != nil {
					return err
				}
				*p(s) = v
				return nil
			}
		}}
}

// optGroupField is an optional struct field *G (deletionVector): nil is
// null.
func optGroupField[S, G any](name string, p func(*S) **G, fields ...ckField[G]) ckField[S] {
	node, leaves := structNode(fields)
	out := written(fields)
	return ckField[S]{name: name, node: node, leaves: leaves,
		encode: func(e *rowEncoder, def int, s *S) {
			v := *p(s)
			if v == nil {
				e.null(leaves, def-1)
				return
			}
			for _, f := range out {
				f.encode(e, def+1, v)
			}
		},
		bind: func(b *binder, parent *parquet.Column) func([][]parquet.Value, *S) error {
			c := child(parent, name)
			g := b.group(c)
			decode := bindFields(b, c, fields)
			return func(rv [][]parquet.Value, s *S) error {
				if !g.present(rv) {
					return nil
				}
				v := new(G)
				if err := decode(rv, v); err != nil {
					return err
				}
				*p(s) = v
				return nil
			}
		}}
}

// ckSchema is the Parquet schema of the written actions among actions.
func ckSchema(actions []ckAction) (*parquet.Schema, int) {
	var fs []parquet.Field
	leaves := 0
	for _, a := range actions {
		if !a.readOnly {
			fs = append(fs, pqnode.Field(a.name, a.node))
			leaves += a.leaves
		}
	}
	return parquet.NewSchema("spark_schema", pqnode.Group(fs...)), leaves
}

// encodeRow is a's row of a checkpoint of actions' columns.
func encodeRow(actions []ckAction, e *rowEncoder, row parquet.Row, a *Action) parquet.Row {
	e.row, e.col = row, 0
	for i := range actions {
		if !actions[i].readOnly {
			actions[i].encode(e, a)
		}
	}
	return e.row
}

// bindCheckpoint binds every action's columns in a file and returns the
// decoder of a row: it calls fn for each action the row holds (normally
// one, none for rows of actions this package does not know).
func bindCheckpoint(b *binder, root *parquet.Column) func(rv [][]parquet.Value, fn func(*Action) error) error {
	decoders := make([]func([][]parquet.Value, func(*Action) error) error, len(ckActions))
	for i, a := range ckActions {
		decoders[i] = a.bind(b, root)
	}
	return func(rv [][]parquet.Value, fn func(*Action) error) error {
		for _, d := range decoders {
			if err := d(rv, fn); err != nil {
				return err
			}
		}
		return nil
	}
}
