package actors

import "testing"

func TestParseTxnAppID(t *testing.T) {
	for _, tc := range []struct {
		appID string
		want  int32
		ok    bool
	}{
		{TxnAppID("deltaflow", "sensor-events", 0), 0, true},
		{TxnAppID("deltaflow", "sensor-events", 17), 17, true},
		{"deltaflow-sensor-events-2147483647", 2147483647, true},
		{"deltaflow-sensor-events-2147483648", 0, false}, // past int32
		{"deltaflow-sensor-events--1", 0, false},
		{"deltaflow-sensor-events-01", 0, false}, // TxnAppID never writes it
		{"deltaflow-sensor-events-", 0, false},
		{"deltaflow-sensor-events-x", 0, false},
		{"deltaflow-other-topic-3", 0, false},
		{"other-sensor-events-3", 0, false},
		{"9f2c1d3e-5b7a-4c1e-8e2f-0a1b2c3d4e5f", 0, false}, // a Spark query id
	} {
		p, ok := ParseTxnAppID(tc.appID, "deltaflow", "sensor-events")
		if p != tc.want || ok != tc.ok {
			t.Errorf("ParseTxnAppID(%q) = %d, %v; want %d, %v", tc.appID, p, ok, tc.want, tc.ok)
		}
	}
	// A topic that itself ends in "-<digits>" stays apart from its prefix.
	if p, ok := ParseTxnAppID(TxnAppID("app", "events-2", 5), "app", "events"); ok {
		t.Errorf("topic events-2's appId parsed as partition %d of topic events", p)
	}
}
