package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// TestCheckRetention: a txn retention the committer cannot refresh within
// (under two flush intervals) is refused, naming both settings, typed.
func TestCheckRetention(t *testing.T) {
	schema := &delta.StructType{Fields: []delta.StructField{{Name: "id", Type: delta.Long, Nullable: true}}}
	for _, tc := range []struct {
		retention string // "" leaves the property out
		ok        bool
	}{{"", true}, {"interval 1 hours", true}, {"3 minutes", true}, {"2 minutes", false}, {"interval 90 seconds", false}} {
		conf := map[string]string{}
		if tc.retention != "" {
			conf["delta.setTransactionRetentionDuration"] = tc.retention
		}
		snap, err := delta.NewTable(storage.NewMem()).Create(t.Context(), schema, nil, conf)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckRetention(snap, time.Minute)
		var re *RetentionError
		if !tc.ok && !errors.As(err, &re) {
			t.Errorf("retention %q: %v is no *RetentionError", tc.retention, err)
		}
		if tc.ok != (err == nil) || err != nil && !(strings.Contains(err.Error(), "delta.setTransactionRetentionDuration") && strings.Contains(err.Error(), "flush.interval")) {
			t.Errorf("retention %q: err = %v", tc.retention, err)
		}
	}
}
