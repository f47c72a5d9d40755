package delta

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/deltaflow/deltaflow/internal/failpoint"
	"github.com/deltaflow/deltaflow/storage"
)

// V2 checkpoints (PROTOCOL.md "V2 Spec", "V2 Checkpoint Table Feature"):
// a checkpoint, classic-named or UUID-named (%020d.checkpoint.<uuid>.json
// or .parquet), that holds the non-file actions, a checkpointMetadata
// action, and sidecar actions naming Parquet files in _delta_log/_sidecars
// that hold the file actions.

// SidecarDir holds the sidecar files of V2 checkpoints.
const SidecarDir = LogDir + "_sidecars/"

// checkpointPolicyKey is the table property asking for V2 checkpoints
// ("v2"; "classic", the default, for V1).
const checkpointPolicyKey = "delta.checkpointPolicy"

// sidecarActions bounds the file actions of one sidecar, so that a large
// state is spread over several files readers can take in parallel.
const sidecarActions = 100_000

// writesV2Checkpoints reports whether the table asks for V2 checkpoints:
// delta.checkpointPolicy=v2 on a table supporting v2Checkpoint.
func (s *Snapshot) writesV2Checkpoints() bool {
	return strings.EqualFold(s.metadata.Configuration[checkpointPolicyKey], "v2") &&
		slices.Contains(s.protocol.readerFeatureSet(), "v2Checkpoint")
}

// writeV2Checkpoint writes a UUID-named V2 checkpoint of version (PROTOCOL.md
// "V2 Spec"): the file actions in sidecar files of at most perSidecar
// actions each, then the top-level JSON file holding a checkpointMetadata
// action, the other actions and one sidecar action per sidecar, then
// _last_checkpoint; call it only once the commit of version exists. Every
// file has a new name, so nothing is ever overwritten, and the top-level
// file, which makes the checkpoint visible, is written last.
func writeV2Checkpoint(ctx context.Context, store storage.Store, version int64, actions []Action, perSidecar int) (*LastCheckpoint, error) {
	key := fmt.Sprintf("%s%020d.checkpoint.%s.json", LogDir, version, uuid.NewString())
	if err := checkStateActions(key, actions); err != nil {
		return nil, err
	}
	top := []Action{{CheckpointMetadata: &CheckpointMetadata{Version: version}}}
	var files []Action
	for _, a := range actions {
		switch {
		case a.Add != nil || a.Remove != nil:
			files = append(files, a)
		case a.Protocol != nil || a.MetaData != nil || a.Txn != nil || a.DomainMetadata != nil:
			top = append(top, a)
		}
	}
	lc := &LastCheckpoint{Version: version}
	for part := range slices.Chunk(files, perSidecar) {
		data, rows, adds, err := encodeActionRows(sidecarSchema, (*rowEncoder).encodeFiles, part)
		if err != nil {
			return nil, fmt.Errorf("write checkpoint %s: sidecar: %w", key, err)
		}
		name := uuid.NewString() + ".parquet"
		if err := store.Put(ctx, SidecarDir+name, data); err != nil {
			return nil, fmt.Errorf("write checkpoint %s: %w", key, err)
		}
		top = append(top, Action{Sidecar: &Sidecar{Path: name, SizeInBytes: int64(len(data)), ModificationTime: time.Now().UnixMilli()}})
		lc.Size += rows
		lc.SizeInBytes += int64(len(data))
		lc.NumOfAddFiles += adds
	}
	data, err := EncodeActions(top)
	if err != nil {
		return nil, fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	if err := store.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	failpoint.Hit(failpoint.Checkpoint)
	lc.Size += int64(len(top)) // the actions in sidecars, and those of the top-level file
	lc.SizeInBytes += int64(len(data))
	return lc, writeLastCheckpoint(ctx, store, lc)
}

// readCheckpointPart reads one checkpoint file, JSON or Parquet, and the
// sidecars it names, calling fn for each action (sidecar and
// checkpointMetadata actions included).
func readCheckpointPart(ctx context.Context, store storage.Store, key string, fn func(*Action) error) error {
	var sidecars []string
	collect := func(a *Action) error {
		if a.Sidecar != nil {
			name, err := sidecarName(key, a.Sidecar)
			if err != nil {
				return err
			}
			sidecars = append(sidecars, name)
		}
		return fn(a)
	}
	if err := readCheckpointTop(ctx, store, key, collect); err != nil {
		return err
	}
	for _, name := range sidecars {
		if err := readCheckpointFile(ctx, store, SidecarDir+name, fn); err != nil {
			return fmt.Errorf("checkpoint %s: sidecar: %w", key, err)
		}
	}
	return nil
}

// readCheckpointTop reads the actions of one checkpoint file, JSON or
// Parquet, without the sidecars it names.
func readCheckpointTop(ctx context.Context, store storage.Store, key string, fn func(*Action) error) error {
	if !strings.HasSuffix(key, ".json") {
		return readCheckpointFile(ctx, store, key, fn)
	}
	data, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	actions, err := ParseActions(key, data)
	if err != nil {
		return err
	}
	for i := range actions {
		if err := fn(&actions[i]); err != nil {
			return err
		}
	}
	return nil
}

// sidecarName is the file name, in SidecarDir, of a sidecar that
// checkpoint names; sidecars live nowhere else.
func sidecarName(checkpoint string, sc *Sidecar) (string, error) {
	name, err := DecodePath(sc.Path)
	if err != nil || name == "" || strings.Contains(name, "/") {
		return "", &CorruptLogError{File: checkpoint, Err: fmt.Errorf("sidecar path %q is not a file in %s", sc.Path, SidecarDir)}
	}
	return name, nil
}
