package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/deltaflow/deltaflow/delta/internal/pqnode"
	"github.com/deltaflow/deltaflow/internal/failpoint"
	"github.com/deltaflow/deltaflow/storage"
)

// LogDir is the key prefix of the transaction log, relative to the table root.
const LogDir = "_delta_log/"

// LastCheckpointKey is the key of the _last_checkpoint hint.
const LastCheckpointKey = LogDir + "_last_checkpoint"

// CommitKey is the key of the commit file of version.
func CommitKey(version int64) string { return fmt.Sprintf("%s%020d.json", LogDir, version) }

// CheckpointKey is the key of the classic single-file checkpoint of version.
func CheckpointKey(version int64) string {
	return fmt.Sprintf("%s%020d.checkpoint.parquet", LogDir, version)
}

// CheckpointPartKey is the key of part (1-based) of a multi-part checkpoint.
func CheckpointPartKey(version int64, part, parts int) string {
	return fmt.Sprintf("%s%020d.checkpoint.%010d.%010d.parquet", LogDir, version, part, parts)
}

// CheckpointKeys lists the files of the classic checkpoint of version with
// the given number of parts; parts <= 1 means the single-file form (delta-kernel
// once wrote "parts":1 for a single file, kernel#1043).
func CheckpointKeys(version int64, parts int) []string {
	if parts <= 1 {
		return []string{CheckpointKey(version)}
	}
	keys := make([]string, parts)
	for i := range keys {
		keys[i] = CheckpointPartKey(version, i+1, parts)
	}
	return keys
}

// LogFileKind classifies a file in _delta_log.
type LogFileKind int

const (
	LogFileUnknown             LogFileKind = iota
	LogFileCommit                          // %020d.json
	LogFileCheckpoint                      // %020d.checkpoint.parquet
	LogFileMultiPartCheckpoint             // %020d.checkpoint.%010d.%010d.parquet
	LogFileCRC                             // %020d.crc
	LogFileLastCheckpoint                  // _last_checkpoint
	// LogFileUUIDCheckpoint is a UUID-named V2 checkpoint
	// (%020d.checkpoint.<uuid>.json|parquet).
	LogFileUUIDCheckpoint
	// LogFileCompacted is a log compaction file (%020d.%020d.compacted.json);
	// an optional optimization that readers may ignore.
	LogFileCompacted
)

var logFileKindNames = [...]string{"unknown", "commit", "checkpoint", "multi-part checkpoint",
	"crc", "last checkpoint", "unsupported checkpoint", "compacted"}

func (k LogFileKind) String() string {
	if k >= 0 && int(k) < len(logFileKindNames) {
		return logFileKindNames[k]
	}
	return "LogFileKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseLogFileName classifies a _delta_log file by name; name is either the
// base name or the key with the LogDir prefix. For a single-file checkpoint
// part and parts are 1; for _last_checkpoint version is -1. ok is false for
// names that are no log files (temporary files, other directories, junk).
func ParseLogFileName(name string) (version int64, kind LogFileKind, part, parts int, ok bool) {
	name = strings.TrimPrefix(name, LogDir)
	if name == "_last_checkpoint" {
		return -1, LogFileLastCheckpoint, 0, 0, true
	}
	version, ok = parseDigits(name, 20)
	if !ok {
		return 0, LogFileUnknown, 0, 0, false
	}
	rest := name[20:]
	switch rest {
	case ".json":
		return version, LogFileCommit, 0, 0, true
	case ".crc":
		return version, LogFileCRC, 0, 0, true
	case ".checkpoint.parquet":
		return version, LogFileCheckpoint, 1, 1, true
	}
	if r, found := strings.CutPrefix(rest, ".checkpoint."); found {
		// Multi-part: %010d.%010d.parquet.
		if len(r) == 10+1+10+len(".parquet") && r[10] == '.' && strings.HasSuffix(r, ".parquet") {
			p, ok1 := parseDigits(r, 10)
			n, ok2 := parseDigits(r[11:], 10)
			if ok1 && ok2 && p >= 1 && p <= n {
				return version, LogFileMultiPartCheckpoint, int(p), int(n), true
			}
			return 0, LogFileUnknown, 0, 0, false
		}
		// V2: <uuid>.json or <uuid>.parquet.
		if id, ext, found := strings.Cut(r, "."); found && isUUID(id) && (ext == "json" || ext == "parquet") {
			return version, LogFileUUIDCheckpoint, 0, 0, true
		}
		return 0, LogFileUnknown, 0, 0, false
	}
	if len(rest) == 1+20+len(".compacted.json") && rest[0] == '.' && strings.HasSuffix(rest, ".compacted.json") {
		if end, ok := parseDigits(rest[1:], 20); ok && end >= version {
			return version, LogFileCompacted, 0, 0, true
		}
	}
	return 0, LogFileUnknown, 0, 0, false
}

// parseDigits parses the first n bytes of s, which must all be ASCII digits.
func parseDigits(s string, n int) (int64, bool) {
	if len(s) < n {
		return 0, false
	}
	for i := range n {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s[:n], 10, 64)
	return v, err == nil
}

// isUUID reports whether s has the 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// LastCheckpoint is the content of _delta_log/_last_checkpoint: a hint to the
// newest checkpoint. Other fields writers add (checkpointSchema, checksum,
// tags, v2Checkpoint) are ignored on read.
type LastCheckpoint struct {
	Version int64 `json:"version"`
	// Size is the number of actions in the checkpoint. Old delta-rs wrote
	// the size in bytes here (delta-rs#1468), so treat it as a hint only.
	Size int64 `json:"size"`
	// Parts is set only for multi-part checkpoints; "parts":1 for a single
	// file broke Trino (kernel#1043).
	Parts         *int  `json:"parts,omitempty"`
	SizeInBytes   int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles int64 `json:"numOfAddFiles,omitempty"`
}

// Keys lists the checkpoint files the hint names.
func (lc *LastCheckpoint) Keys() []string {
	parts := 1
	if lc.Parts != nil {
		parts = *lc.Parts
	}
	return CheckpointKeys(lc.Version, parts)
}

// ReadLastCheckpoint reads the _last_checkpoint hint. It returns an error
// wrapping storage.ErrNotExist when there is none, and a *CorruptLogError
// when it cannot be used; in both cases callers fall back to listing the log.
func ReadLastCheckpoint(ctx context.Context, store storage.Store) (*LastCheckpoint, error) {
	data, err := store.Get(ctx, LastCheckpointKey)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", LastCheckpointKey, err)
	}
	// A bad hint must not make the table unreadable: kernel ignores it and
	// Spark lists after retries, so report it as corrupt for the caller.
	var lc LastCheckpoint
	if err := json.Unmarshal(data, &lc); err != nil {
		return nil, &CorruptLogError{File: LastCheckpointKey, Err: err}
	}
	var probe struct {
		Version *int64 `json:"version"`
	}
	_ = json.Unmarshal(data, &probe)
	switch {
	case probe.Version == nil:
		return nil, &CorruptLogError{File: LastCheckpointKey, Err: errors.New("no version")}
	case lc.Version < 0:
		return nil, &CorruptLogError{File: LastCheckpointKey, Err: fmt.Errorf("negative version %d", lc.Version)}
	case lc.Parts != nil && *lc.Parts < 1:
		return nil, &CorruptLogError{File: LastCheckpointKey, Err: fmt.Errorf("invalid parts %d", *lc.Parts)}
	}
	return &lc, nil
}

// WriteCheckpoint writes the classic single-file checkpoint of version and
// then _last_checkpoint; call it only once the commit of version exists.
// actions is the snapshot state in the order to write:
// protocol, metaData, live adds (dataChange=false), unexpired removes, txns,
// domainMetadata; commitInfo and unknown actions are dropped. The file has
// the schema Spark 3.5 writes plus add.clusteringProvider as delta-spark 4
// writes it (a clustered table's files must keep it), so remove.stats/tags
// are not kept.
//
// The whole file is built in memory and stored with one Put, so no reader
// sees a partial file; two writers racing on the same version write the same
// state, and the last one wins. _last_checkpoint is written only after the checkpoint is
// complete, since readers (kernel) fail when the hint names a missing file,
// and only when it names an older checkpoint (or none, or is unreadable).
func WriteCheckpoint(ctx context.Context, store storage.Store, version int64, actions []Action) (*LastCheckpoint, error) {
	key := CheckpointKey(version)
	if err := checkStateActions(key, actions); err != nil {
		return nil, err
	}
	data, rows, adds, err := encodeCheckpoint(actions)
	if err != nil {
		return nil, fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	if err := store.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	failpoint.Hit(failpoint.Checkpoint)
	lc := &LastCheckpoint{Version: version, Size: rows, SizeInBytes: int64(len(data)), NumOfAddFiles: adds}
	return lc, writeLastCheckpoint(ctx, store, lc)
}

// checkStateActions refuses checkpoint actions without exactly one protocol
// and one metaData: a checkpoint replaces the commits before it, which log
// cleanup then deletes, so such a checkpoint would leave the table
// unreadable.
func checkStateActions(key string, actions []Action) error {
	var protocols, metadatas int
	for i := range actions {
		if actions[i].Protocol != nil {
			protocols++
		}
		if actions[i].MetaData != nil {
			metadatas++
		}
	}
	if protocols != 1 || metadatas != 1 {
		return fmt.Errorf("write checkpoint %s: need one protocol and one metaData, got %d and %d", key, protocols, metadatas)
	}
	return nil
}

// writeLastCheckpoint points _last_checkpoint at lc's checkpoint, which
// must be complete. The hint never moves backwards: a slow writer finishing
// an older checkpoint after a newer one must not send readers (and log
// cleanup, which keeps what the newest checkpoint needs) to the older one.
func writeLastCheckpoint(ctx context.Context, store storage.Store, lc *LastCheckpoint) error {
	if cur, err := ReadLastCheckpoint(ctx, store); err == nil && cur.Version >= lc.Version {
		return nil
	}
	hint, err := json.Marshal(lc)
	if err != nil {
		return fmt.Errorf("write %s: %w", LastCheckpointKey, err)
	}
	if err := store.Put(ctx, LastCheckpointKey, hint); err != nil {
		return fmt.Errorf("write %s: %w", LastCheckpointKey, err)
	}
	return nil
}

// encodeCheckpoint returns the Parquet file of actions, its row count and
// its number of adds.
func encodeCheckpoint(actions []Action) (data []byte, rows, adds int64, err error) {
	return encodeActionRows(checkpointSchema, (*rowEncoder).encode, actions)
}

// encodeActionRows writes the checkpoint actions among actions (not
// commitInfo or unknown ones) as Parquet rows of schema, each made by
// encode, and returns the file, its row count and its number of adds.
func encodeActionRows(schema *parquet.Schema, encode func(*rowEncoder, parquet.Row, *Action) parquet.Row,
	actions []Action) (data []byte, rows, adds int64, err error) {
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, schema,
		parquet.Compression(&parquet.Snappy),
		parquet.DataPageVersion(1), // Delta asks for V1 data pages
		// parquet-go defaults to DELTA_LENGTH_BYTE_ARRAY; PLAIN is what every
		// reader handles.
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
	)
	const batchSize = 512
	batch := make([]parquet.Row, 0, batchSize)
	var enc rowEncoder
	flush := func() error {
		if _, err := w.WriteRows(batch); err != nil {
			return err
		}
		batch = batch[:0]
		return nil
	}
	for i := range actions {
		a := &actions[i]
		if a.Protocol == nil && a.MetaData == nil && a.Txn == nil && a.Add == nil &&
			a.Remove == nil && a.DomainMetadata == nil {
			continue // commitInfo or unknown: not part of a checkpoint
		}
		if a.Add != nil {
			adds++
		}
		// Reuse the row slices of earlier batches: WriteRows copies the values.
		n := len(batch)
		batch = batch[:n+1]
		batch[n] = encode(&enc, batch[n][:0], a)
		rows++
		if len(batch) == batchSize {
			if err := flush(); err != nil {
				return nil, 0, 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, 0, 0, err
	}
	if err := w.Close(); err != nil {
		return nil, 0, 0, err
	}
	return buf.Bytes(), rows, adds, nil
}

// The checkpoint schema, field for field as Spark 3.5 writes it, with
// add.clusteringProvider where delta-spark 4 writes it (parquet-mr
// 1.13.1; see docs/delta-notes.md §4). Every field is optional, integers carry no
// logical type annotation, maps are MAP(repeated key_value{required key;
// optional value}) and lists are LIST(repeated list{optional element}).
// parquet.Group sorts fields by name, so groups are built with orderedGroup.
var (
	pqString = parquet.Optional(parquet.String())
	pqInt32  = parquet.Optional(parquet.Leaf(plainType{parquet.Int32Type}))
	pqInt64  = parquet.Optional(parquet.Leaf(plainType{parquet.Int64Type}))
	pqBool   = parquet.Optional(parquet.Leaf(plainType{parquet.BooleanType}))
	pqMap    = parquet.Optional(pqnode.MapOf(parquet.String(), pqString))
	pqList   = parquet.Optional(pqnode.ListOf(pqString))

	checkpointSchema, checkpointColumns = ckSchema(ckActions)
	// sidecarSchema is a V2 checkpoint sidecar's: file actions only.
	sidecarSchema, _ = ckSchema(fileActions)
	fileActions      = slices.DeleteFunc(slices.Clone(ckActions), func(a ckAction) bool { return a.name != "add" && a.name != "remove" })
)

// plainType is an INT32, INT64 or BOOLEAN type as Spark writes it: without
// the INT(bits, signed) logical type parquet-go adds to its integer types,
// and without a type_length (parquet-go writes the bit width; the format
// defines it for FIXED_LEN_BYTE_ARRAY only, and parquet-go reads it only there).
type plainType struct{ parquet.Type }

func (plainType) LogicalType() *format.LogicalType { return nil }
func (plainType) Length() int                      { return 0 }

// rowEncoder turns an action into a checkpoint row. Definition levels count
// the optional and repeated fields present on the path: the action struct is
// at level 1, its direct fields at 2, and so on.
type rowEncoder struct {
	row parquet.Row
	col int
}

// encode is a's row of a classic checkpoint (checkpointSchema).
func (e *rowEncoder) encode(row parquet.Row, a *Action) parquet.Row {
	row = encodeRow(ckActions, e, row, a)
	if e.col != checkpointColumns {
		panic(fmt.Sprintf("delta: checkpoint row has %d columns, schema %d", e.col, checkpointColumns))
	}
	return row
}

// encodeFiles is a's row of a V2 checkpoint sidecar (sidecarSchema).
func (e *rowEncoder) encodeFiles(row parquet.Row, a *Action) parquet.Row {
	return encodeRow(fileActions, e, row, a)
}

func (e *rowEncoder) put(v parquet.Value, def int) {
	e.row = append(e.row, v.Level(0, def, e.col))
	e.col++
}

// null writes n columns as null at definition level def.
func (e *rowEncoder) null(n, def int) {
	for range n {
		e.put(parquet.NullValue(), def)
	}
}

func (e *rowEncoder) str(def int, s string)   { e.put(strValue(s), def) }
func (e *rowEncoder) i32(def int, v int32)    { e.put(parquet.Int32Value(v), def) }
func (e *rowEncoder) i64(def int, v int64)    { e.put(parquet.Int64Value(v), def) }
func (e *rowEncoder) boolean(def int, v bool) { e.put(parquet.BooleanValue(v), def) }

func (e *rowEncoder) optStr(def int, s string, null bool) {
	if null {
		e.null(1, def-1)
	} else {
		e.str(def, s)
	}
}

func (e *rowEncoder) optStrPtr(def int, s *string) {
	if s == nil {
		e.null(1, def-1)
	} else {
		e.str(def, *s)
	}
}

func (e *rowEncoder) optI64(def int, v *int64) {
	if v == nil {
		e.null(1, def-1)
	} else {
		e.i64(def, *v)
	}
}

// strList writes a LIST of strings present at level def: null at def-1,
// empty at def, elements at def+2 (def+1 is the repeated group).
func (e *rowEncoder) strList(def int, l []string, null bool) {
	switch {
	case null:
		e.null(1, def-1)
	case len(l) == 0:
		e.null(1, def)
	default:
		for i, s := range l {
			e.row = append(e.row, strValue(s).Level(min(i, 1), def+2, e.col))
		}
		e.col++
	}
}

// strMap writes a MAP<string,string> present at level def: null at def-1,
// empty at def, entries at def+1, non-null values at def+2. A nil *string
// value is written as a null value, never as "". Keys are sorted so the
// file is deterministic.
func strMap[V string | *string](e *rowEncoder, def int, m map[string]V, null bool) {
	switch {
	case null:
		e.null(2, def-1)
		return
	case len(m) == 0:
		e.null(2, def)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		e.row = append(e.row, strValue(k).Level(min(i, 1), def+1, e.col))
	}
	for i, k := range keys {
		var v parquet.Value
		switch val := any(m[k]).(type) {
		case string:
			v = strValue(val).Level(min(i, 1), def+2, e.col+1)
		case *string:
			if val == nil {
				v = parquet.NullValue().Level(min(i, 1), def+1, e.col+1)
			} else {
				v = strValue(*val).Level(min(i, 1), def+2, e.col+1)
			}
		}
		e.row = append(e.row, v)
	}
	e.col += 2
}

// strValue makes a BYTE_ARRAY value that shares the string's memory; the
// writer copies it into its buffers.
func strValue(s string) parquet.Value {
	return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s)))
}
