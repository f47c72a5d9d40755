package delta

import (
	"context"
	"fmt"
	"strings"

	"github.com/deltaflow/deltaflow/storage"
)

// V2 checkpoints (PROTOCOL.md "V2 Spec", "V2 Checkpoint Table Feature"):
// a checkpoint, classic-named or UUID-named (%020d.checkpoint.<uuid>.json
// or .parquet), that holds the non-file actions, a checkpointMetadata
// action, and sidecar actions naming Parquet files in _delta_log/_sidecars
// that hold the file actions.

// SidecarDir holds the sidecar files of V2 checkpoints.
const SidecarDir = LogDir + "_sidecars/"

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
