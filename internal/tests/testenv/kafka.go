package testenv

import (
	"context"
	"testing"

	"github.com/deltaflow/deltaflow/bridge/kafka"
)

// HighWatermarks returns the end offset of each partition of topic.
func HighWatermarks(t testing.TB, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	kcfg := kafka.DefaultConfig()
	kcfg.Brokers = brokers
	kcfg.Topic = topic
	kcfg.Mode = kafka.ModePartitions
	kcfg.Partitions = []int32{0}
	c, err := kafka.NewConsumer(kcfg, nopHandler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hw, err := c.EndOffsets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

// nopHandler serves a consumer that only asks for metadata.
type nopHandler struct{}

func (nopHandler) Assigned(context.Context, string, []int32) (map[int32]int64, error) {
	return nil, nil
}
func (nopHandler) Revoked(context.Context, string, []int32) {}
