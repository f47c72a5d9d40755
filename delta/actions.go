package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
)

// Protocol is the protocol action: the reader and writer versions (and, at
// 3/7, the table features) a client must support.
type Protocol struct {
	MinReaderVersion int32    `json:"minReaderVersion"`
	MinWriterVersion int32    `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format names the data file format of a table; always parquet.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action. SchemaString holds the table schema as
// written in the log; Schema parses it.
type Metadata struct {
	ID               string            `json:"id"`
	Name             *string           `json:"name,omitempty"`
	Description      *string           `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// MarshalJSON writes the required maps and lists as {} and [] when empty:
// readers such as delta-kernel reject null there.
func (m Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	if m.Format.Options == nil {
		m.Format.Options = map[string]string{}
	}
	if m.PartitionColumns == nil {
		m.PartitionColumns = []string{}
	}
	if m.Configuration == nil {
		m.Configuration = map[string]string{}
	}
	return jsonenc.Marshal(plain(m))
}

// WithProperty returns a copy of m whose configuration (the table
// properties) sets key to value; m is left alone.
func (m Metadata) WithProperty(key, value string) *Metadata {
	m.Configuration = maps.Clone(m.Configuration)
	if m.Configuration == nil {
		m.Configuration = map[string]string{}
	}
	m.Configuration[key] = value
	return &m
}

// Schema parses SchemaString.
func (m *Metadata) Schema() (*StructType, error) {
	return ParseSchema(m.SchemaString)
}

// DeletionVector describes a deletion vector attached to a file: read by
// LoadDeletionVector, written by WriteDeletionVector (upserts), kept
// through replay so checkpoints stay faithful.
type DeletionVector struct {
	StorageType    string `json:"storageType"`
	PathOrInlineDv string `json:"pathOrInlineDv"`
	Offset         *int32 `json:"offset,omitempty"`
	SizeInBytes    int32  `json:"sizeInBytes"`
	Cardinality    int64  `json:"cardinality"`
	MaxRowIndex    *int64 `json:"maxRowIndex,omitempty"`
}

// UniqueID identifies the deletion vector, as part of a file's replay key.
func (dv *DeletionVector) UniqueID() string {
	if dv == nil {
		return ""
	}
	if dv.Offset != nil {
		return fmt.Sprintf("%s%s@%d", dv.StorageType, dv.PathOrInlineDv, *dv.Offset)
	}
	return dv.StorageType + dv.PathOrInlineDv
}

// Add is the add action: a data file that became part of the table. Path is a
// URI relative to the table root (EncodePath) or absolute, exactly as written
// in the log; the table compares paths in canonical form (StoreKey). A nil
// value in PartitionValues is a null partition value.
type Add struct {
	Path                    string             `json:"path"`
	PartitionValues         map[string]*string `json:"partitionValues"`
	Size                    int64              `json:"size"`
	ModificationTime        int64              `json:"modificationTime"`
	DataChange              bool               `json:"dataChange"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
	ClusteringProvider      *string            `json:"clusteringProvider,omitempty"`
}

// MarshalJSON always writes partitionValues, as {} when there are none.
func (a Add) MarshalJSON() ([]byte, error) {
	type plain Add
	if a.PartitionValues == nil {
		a.PartitionValues = map[string]*string{}
	}
	return jsonenc.Marshal(plain(a))
}

// Remove is the remove action: a tombstone for a file that left the table.
// Path must be byte-identical to the add's path.
type Remove struct {
	Path                    string             `json:"path"`
	DeletionTimestamp       *int64             `json:"deletionTimestamp,omitempty"`
	DataChange              bool               `json:"dataChange"`
	ExtendedFileMetadata    *bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues         map[string]*string `json:"partitionValues,omitempty"`
	Size                    *int64             `json:"size,omitempty"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
}

// DeletionTime is the tombstone's deletion timestamp in ms; Spark reads a
// missing one as 0, so such a tombstone expires at once.
func (r *Remove) DeletionTime() int64 {
	if r.DeletionTimestamp == nil {
		return 0
	}
	return *r.DeletionTimestamp
}

// AddCDC is the cdc action: a change data file of the commit. DataChange
// is always false: the file is no part of the table's data.
type AddCDC struct {
	Path            string             `json:"path"`
	PartitionValues map[string]*string `json:"partitionValues"`
	Size            int64              `json:"size"`
	DataChange      bool               `json:"dataChange"`
	Tags            map[string]string  `json:"tags,omitempty"`
}

// MarshalJSON always writes partitionValues, as {} when there are none,
// as Spark does.
func (c AddCDC) MarshalJSON() ([]byte, error) {
	type plain AddCDC
	if c.PartitionValues == nil {
		c.PartitionValues = map[string]*string{}
	}
	return jsonenc.Marshal(plain(c))
}

// Txn is the txn (SetTransaction) action: the latest version an application
// committed, used for idempotent writes. deltaflow writes one per Kafka
// partition with the last committed offset as Version.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// CommitInfo is the commitInfo action: provenance of one commit. Fields that
// other writers add and this library does not know are dropped on read.
type CommitInfo struct {
	// InCommitTimestamp is written first, as in-commit timestamps require.
	InCommitTimestamp   *int64         `json:"inCommitTimestamp,omitempty"`
	Timestamp           int64          `json:"timestamp"`
	Operation           string         `json:"operation,omitempty"`
	OperationParameters map[string]any `json:"operationParameters,omitempty"`
	ReadVersion         *int64         `json:"readVersion,omitempty"`
	IsolationLevel      string         `json:"isolationLevel,omitempty"`
	IsBlindAppend       *bool          `json:"isBlindAppend,omitempty"`
	OperationMetrics    map[string]any `json:"operationMetrics,omitempty"`
	EngineInfo          string         `json:"engineInfo,omitempty"`
	ClientVersion       string         `json:"clientVersion,omitempty"`
	UserMetadata        string         `json:"userMetadata,omitempty"`
	TxnID               string         `json:"txnId,omitempty"`
}

// DomainMetadata is the domainMetadata action; the latest per domain wins and
// Removed marks a tombstone.
type DomainMetadata struct {
	Domain        string `json:"domain"`
	Configuration string `json:"configuration"`
	Removed       bool   `json:"removed"`
}

// Sidecar is the sidecar action of a V2 checkpoint: a Parquet file in
// _delta_log/_sidecars holding some of the checkpoint's file actions. Path
// is URI-encoded, usually just the file name.
type Sidecar struct {
	Path             string            `json:"path"`
	SizeInBytes      int64             `json:"sizeInBytes"`
	ModificationTime int64             `json:"modificationTime"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// CheckpointMetadata is the checkpointMetadata action of a V2 checkpoint.
type CheckpointMetadata struct {
	Version int64             `json:"version"`
	Tags    map[string]string `json:"tags,omitempty"`
}

// Action is one line of a commit file: exactly one field is set. A line whose
// action this library does not know is kept verbatim in Unknown and ignored
// by replay, as are cdc actions (change data files).
type Action struct {
	CommitInfo     *CommitInfo     `json:"commitInfo,omitempty"`
	Protocol       *Protocol       `json:"protocol,omitempty"`
	MetaData       *Metadata       `json:"metaData,omitempty"`
	Txn            *Txn            `json:"txn,omitempty"`
	Add            *Add            `json:"add,omitempty"`
	Remove         *Remove         `json:"remove,omitempty"`
	Cdc            *AddCDC         `json:"cdc,omitempty"`
	DomainMetadata *DomainMetadata `json:"domainMetadata,omitempty"`
	// Sidecar and CheckpointMetadata only occur in V2 checkpoints; replay
	// ignores them.
	Sidecar            *Sidecar            `json:"sidecar,omitempty"`
	CheckpointMetadata *CheckpointMetadata `json:"checkpointMetadata,omitempty"`
	Unknown            json.RawMessage     `json:"-"`
}

// MarshalJSON writes a known action, or the unknown line verbatim.
func (a Action) MarshalJSON() ([]byte, error) {
	if a.Unknown != nil {
		return a.Unknown, nil
	}
	type plain Action
	return jsonenc.Marshal(plain(a))
}

// CorruptLogError reports a commit or checkpoint file that cannot be parsed.
type CorruptLogError struct {
	File string // key of the file, e.g. _delta_log/00000000000000000003.json
	Line int    // 1-based line number, 0 when not line-based
	Err  error
}

func (e *CorruptLogError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("delta: corrupt log file %s line %d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("delta: corrupt log file %s: %v", e.File, e.Err)
}

func (e *CorruptLogError) Unwrap() error { return e.Err }

// ParseActions parses a commit file (newline-delimited JSON). file names the
// source in errors. Blank lines are skipped.
func ParseActions(file string, data []byte) ([]Action, error) {
	actions := make([]Action, 0, bytes.Count(data, []byte{'\n'})+1)
	line := 0
	for len(data) > 0 {
		line++
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		a, err := parseAction(raw)
		if err != nil {
			return nil, &CorruptLogError{File: file, Line: line, Err: err}
		}
		actions = append(actions, a)
	}
	return actions, nil
}

func parseAction(raw []byte) (Action, error) {
	var a Action
	if err := json.Unmarshal(raw, &a); err != nil {
		return Action{}, err
	}
	if a.isEmpty() {
		// Unknown kinds are kept, but a line must still be a JSON object.
		if raw[0] != '{' {
			return Action{}, fmt.Errorf("action is not a JSON object")
		}
		a.Unknown = bytes.Clone(raw)
	}
	if a.Add != nil && a.Add.Path == "" || a.Remove != nil && a.Remove.Path == "" || a.Cdc != nil && a.Cdc.Path == "" {
		return Action{}, fmt.Errorf("file action without path")
	}
	if a.Txn != nil && a.Txn.AppID == "" {
		return Action{}, fmt.Errorf("txn action without appId")
	}
	return a, nil
}

func (a *Action) isEmpty() bool {
	return a.CommitInfo == nil && a.Protocol == nil && a.MetaData == nil && a.Txn == nil &&
		a.Add == nil && a.Remove == nil && a.Cdc == nil && a.DomainMetadata == nil && a.Sidecar == nil && a.CheckpointMetadata == nil
}

// EncodeActions writes actions as a commit file: one JSON object a line,
// HTML characters unescaped, newline-terminated.
func EncodeActions(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	for i := range actions {
		b, err := actions[i].MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encode action %d: %w", i, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}
