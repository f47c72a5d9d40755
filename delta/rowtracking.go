package delta

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/deltaflow/deltaflow/delta/internal/jsonenc"
)

// Row tracking (PROTOCOL.md "Row Tracking"): while the writer feature
// rowTracking is supported and not suspended, every add a writer commits
// carries a baseRowId above the table's row ID high-water mark (the
// delta.rowTracking domain, advanced in the same commit) and, when new, the
// commit's version as defaultRowCommitVersion. A row's fresh row ID is the
// file's baseRowId plus its physical index in the file. With
// delta.enableRowTracking the stable IDs must survive rewrites: OPTIMIZE
// materializes them in hidden columns (see compact).

const (
	rowTrackingDomain          = "delta.rowTracking"
	rowTrackingEnabledKey      = "delta.enableRowTracking"
	rowTrackingSuspendedKey    = "delta.rowTrackingSuspended"
	materializedRowIDKey       = "delta.rowTracking.materializedRowIdColumnName"
	materializedRowVersionKey  = "delta.rowTracking.materializedRowCommitVersionColumnName"
	rowIDHighWaterMarkProperty = "rowIdHighWaterMark"
)

// assignsRowIDs reports whether commits must assign row IDs: rowTracking
// is a supported writer feature and the table does not suspend it.
func (s *Snapshot) assignsRowIDs() bool {
	return s.protocol != nil && slices.Contains(s.protocol.writerFeatureSet(), "rowTracking") &&
		!strings.EqualFold(s.metadata.Configuration[rowTrackingSuspendedKey], "true")
}

// preservesRowIDs reports whether rewrites must keep rows' stable row IDs
// and commit versions: row tracking is enabled (delta.enableRowTracking).
func (s *Snapshot) preservesRowIDs() bool {
	return s.assignsRowIDs() && strings.EqualFold(s.metadata.Configuration[rowTrackingEnabledKey], "true")
}

// rowIDHighWaterMark is the highest row ID assigned so far, -1 if none.
func (s *Snapshot) rowIDHighWaterMark() (int64, error) {
	d, ok := s.domains[rowTrackingDomain]
	if !ok {
		return -1, nil
	}
	var conf map[string]json.RawMessage
	if err := json.Unmarshal([]byte(d.Configuration), &conf); err != nil {
		return 0, fmt.Errorf("domain %s: %w", rowTrackingDomain, err)
	}
	hwm, err := strconv.ParseInt(string(conf[rowIDHighWaterMarkProperty]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("domain %s: %s %s: %w", rowTrackingDomain, rowIDHighWaterMarkProperty, conf[rowIDHighWaterMarkProperty], err)
	}
	return hwm, nil
}

// withRowIDs returns actions as committed at version v: on a table that
// assigns row IDs, every add without a baseRowId gets the next IDs above
// the high-water mark (one per record, so its stats must count them) and
// v as defaultRowCommitVersion, and the delta.rowTracking domain gets the
// new mark. The IDs depend on the version's predecessor, so a commit that
// lost its version to another writer calls this again. actions is left
// alone.
func (s *Snapshot) withRowIDs(actions []Action, v int64) ([]Action, error) {
	if !s.assignsRowIDs() {
		return actions, nil
	}
	hwm, err := s.rowIDHighWaterMark()
	if err != nil {
		return nil, err
	}
	out := slices.Clone(actions)
	assigned := false
	for i, a := range out {
		if a.Add == nil || a.Add.BaseRowID != nil {
			continue
		}
		st, err := ParseStats(a.Add.Stats)
		if err != nil || st.NumRecords < 0 {
			return nil, fmt.Errorf("add %s: row tracking needs its numRecords (stats %q)", a.Add.Path, a.Add.Stats)
		}
		add := *a.Add
		base := hwm + 1
		add.BaseRowID, add.DefaultRowCommitVersion = &base, &v
		hwm += st.NumRecords
		out[i] = Action{Add: &add}
		assigned = true
	}
	if !assigned {
		return actions, nil
	}
	conf, err := jsonenc.Marshal(map[string]any{rowIDHighWaterMarkProperty: hwm, "domainName": rowTrackingDomain})
	if err != nil {
		return nil, err
	}
	return append(out, Action{DomainMetadata: &DomainMetadata{Domain: rowTrackingDomain, Configuration: string(conf)}}), nil
}

// rowTrackingColumns names the hidden columns holding materialized row IDs
// and row commit versions (table properties of an enabled table).
type rowTrackingColumns struct{ rowID, version string }

// materializedRowTrackingColumns are the table's materialized row ID and
// row commit version columns; an enabled table without them is an error.
func (s *Snapshot) materializedRowTrackingColumns() (*rowTrackingColumns, error) {
	c := &rowTrackingColumns{rowID: s.metadata.Configuration[materializedRowIDKey], version: s.metadata.Configuration[materializedRowVersionKey]}
	if c.rowID == "" || c.version == "" {
		return nil, fmt.Errorf("row tracking is enabled but the table names no materialized row ID or row commit version column (%s, %s): stable row IDs cannot be kept",
			materializedRowIDKey, materializedRowVersionKey)
	}
	return c, nil
}

// appendTo returns schema with the two columns (nullable longs) behind its
// own; rows read or written with it carry them last.
func (c *rowTrackingColumns) appendTo(schema *StructType) *StructType {
	out := &StructType{Fields: slices.Clone(schema.Fields)}
	for _, name := range []string{c.rowID, c.version} {
		out.Fields = append(out.Fields, StructField{Name: name, Type: Long, Nullable: true, Metadata: json.RawMessage("{}")})
	}
	return out
}

// stable sets dst[0] and dst[1] to the stable row ID and row commit version
// of row r of file f, read with appendTo's schema: the materialized values
// where the file has them, else the file's baseRowId plus the row's index
// and its defaultRowCommitVersion (PROTOCOL.md "Reader Requirements for
// Row Tracking").
func (c *rowTrackingColumns) stable(f *Add, r IndexedRow, dst []any) error {
	n := len(r.Row)
	id, version := r.Row[n-2], r.Row[n-1]
	if id == nil {
		if f.BaseRowID == nil {
			return fmt.Errorf("row tracking is enabled but the file has no baseRowId")
		}
		id = *f.BaseRowID + int64(r.Index)
	}
	if version == nil {
		if f.DefaultRowCommitVersion == nil {
			return fmt.Errorf("row tracking is enabled but the file has no defaultRowCommitVersion")
		}
		version = *f.DefaultRowCommitVersion
	}
	dst[0], dst[1] = id, version
	return nil
}
