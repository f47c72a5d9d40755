package delta

// TEMPORARY: replaced by checkpoint.go from the checkpoint branch.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/deltaflow/deltaflow/storage"
)

const LogDir = "_delta_log/"

func CommitKey(v int64) string { return fmt.Sprintf("%s%020d.json", LogDir, v) }

type LogFileKind int

const (
	LogFileUnknown LogFileKind = iota
	LogFileCommit
	LogFileCheckpoint
	LogFileMultiPartCheckpoint
	LogFileCRC
	LogFileLastCheckpoint
	LogFileUnsupportedCheckpoint
)

func ParseLogFileName(name string) (version int64, kind LogFileKind, part, parts int, ok bool) {
	name = strings.TrimPrefix(name, LogDir)
	if len(name) < 21 {
		return 0, 0, 0, 0, false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return 0, 0, 0, 0, false
	}
	switch rest := name[20:]; {
	case rest == ".json":
		return v, LogFileCommit, 0, 0, true
	case rest == ".checkpoint.parquet":
		return v, LogFileCheckpoint, 1, 1, true
	}
	return v, LogFileUnknown, 0, 0, false
}

type LastCheckpoint struct {
	Version int64 `json:"version"`
	Size    int64 `json:"size"`
	Parts   *int  `json:"parts,omitempty"`
}

func ReadLastCheckpoint(ctx context.Context, store storage.Store) (*LastCheckpoint, error) {
	b, err := store.Get(ctx, LogDir+"_last_checkpoint")
	if err != nil {
		return nil, err
	}
	var lc LastCheckpoint
	if err := json.Unmarshal(b, &lc); err != nil {
		return nil, &CorruptLogError{File: LogDir + "_last_checkpoint", Err: err}
	}
	return &lc, nil
}

func ReadCheckpoint(ctx context.Context, store storage.Store, keys []string, fn func(*Action) error) error {
	return fmt.Errorf("checkpoints not implemented")
}

func WriteCheckpoint(ctx context.Context, store storage.Store, version int64, actions []Action) (*LastCheckpoint, error) {
	return nil, fmt.Errorf("checkpoints not implemented")
}
