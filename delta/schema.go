package delta

import "github.com/deltaflow/deltaflow/delta/schema"

// The table schema's types and values live in package schema, which the
// data file codec shares without the log; these names keep them in delta's
// API.
type (
	DataType          = schema.DataType
	PrimitiveType     = schema.PrimitiveType
	DecimalType       = schema.DecimalType
	StructField       = schema.StructField
	StructType        = schema.StructType
	ArrayType         = schema.ArrayType
	MapType           = schema.MapType
	SchemaChangeError = schema.SchemaChangeError
	Row               = schema.Row
)

// The primitive types.
const (
	String       = schema.String
	Long         = schema.Long
	Integer      = schema.Integer
	Short        = schema.Short
	Byte         = schema.Byte
	Float        = schema.Float
	Double       = schema.Double
	Boolean      = schema.Boolean
	Binary       = schema.Binary
	Date         = schema.Date
	Timestamp    = schema.Timestamp
	TimestampNTZ = schema.TimestampNTZ
	Variant      = schema.Variant
)

// MaxDecimalPrecision is the largest precision of a DecimalType (38).
const MaxDecimalPrecision = schema.MaxDecimalPrecision

// ErrInvalidSchema is schema.ErrInvalidSchema.
var ErrInvalidSchema = schema.ErrInvalidSchema

// ParseSchema parses a schemaString (see schema.ParseSchema).
func ParseSchema(schemaString string) (*StructType, error) { return schema.ParseSchema(schemaString) }

// MergeSchema merges next into current without widening a type (see
// schema.MergeSchema).
func MergeSchema(current, next *StructType) (merged *StructType, changed bool, err error) {
	return schema.MergeSchema(current, next, false)
}

// CanWiden is schema.CanWiden: the type changes type widening applies.
func CanWiden(from, to DataType) bool { return schema.CanWiden(from, to) }

// TypeWideningHint says how to let a table's columns widen.
const TypeWideningHint = schema.TypeWideningHint

// ParsePartitionValue parses a partitionValues entry (see
// schema.ParsePartitionValue).
func ParsePartitionValue(t DataType, s *string) (any, error) { return schema.ParsePartitionValue(t, s) }

// AsInt64 is schema.AsInt64.
func AsInt64(v any) (int64, bool) { return schema.AsInt64(v) }

// AsFloat64 is schema.AsFloat64.
func AsFloat64(v any) (float64, bool) { return schema.AsFloat64(v) }
