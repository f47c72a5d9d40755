package testenv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// HighWatermarks returns the end offset of each partition of topic. It
// uses franz-go's admin client, not deltaflow's consumer, so that the delta
// package's tests, which use testenv, do not depend on bridge/kafka (which
// depends on delta through the ledger).
func HighWatermarks(t testing.TB, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("testenv: end offsets of %s: %v", topic, err)
	}
	hw := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { hw[o.Partition] = o.Offset })
	return hw
}
