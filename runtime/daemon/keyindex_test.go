package daemon

import (
	"fmt"
	"strings"
	"testing"
)

// TestKeyIndexMemory: an upsert table's key index is bounded by 4 MiB
// unless key_index_memory says otherwise; 0 turns it off, less is refused.
func TestKeyIndexMemory(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want ByteSize
	}{
		{"table: {write_mode: upsert, key_columns: [id]}", 4 << 20},
		{"table: {key_index_memory: 256KiB}", 256 << 10},
		{"table: {key_index_memory: 0}", 0},
	} {
		cfg := DefaultConfig()
		if _, _, err := decode([]byte(tc.yaml), &cfg); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if cfg.Table.KeyIndexMemory != tc.want {
			t.Errorf("%s: key_index_memory %s, want %s", tc.yaml, cfg.Table.KeyIndexMemory, tc.want)
		}
	}
	bad := DefaultConfig().Table
	bad.KeyIndexMemory = -1
	if errs := fmt.Sprint(bad.validate("table")); !strings.Contains(errs, "key_index_memory must be >= 0") {
		t.Errorf("a negative key_index_memory: %s", errs)
	}
}
