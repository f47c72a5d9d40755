package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// TestRunFailsFast: a start that cannot reach Kafka, the table's store or
// NATS gives up within --connect-timeout with one line naming what did not
// answer, --until-latest included (against an unreachable broker it never
// ended); a taken embedded-NATS port is "address already in use".
func TestRunFailsFast(t *testing.T) {
	cluster := newCluster(t)
	cases := []struct {
		name  string
		setup func(cfg *Config)
		want  []string
	}{
		{"kafka", func(cfg *Config) { cfg.Kafka.Brokers = []string{freeAddr(t)} },
			[]string{"kafka: no broker answered", "connection refused"}},
		{"kafka silent", func(cfg *Config) { cfg.Kafka.Brokers = []string{silentAddr(t)} },
			[]string{"kafka: ", "no answer within --connect-timeout 2s"}},
		{"store", func(cfg *Config) {
			cfg.Table.URI = "s3://lake/sensor_events"
			cfg.Storage.Endpoint, cfg.Storage.AccessKey, cfg.Storage.SecretKey = freeAddr(t), "a", "b"
		}, []string{"s3://lake/sensor_events", "connection refused"}},
		{"nats", func(cfg *Config) { cfg.NATS.URL = "nats://" + freeAddr(t) }, []string{"start nats bridge: connect nats"}},
		{"nats port taken", func(cfg *Config) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			cfg.NATS.Listen = l.Addr().String()
		}, []string{"address already in use"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t, cluster.ListenAddrs())
			c.setup(cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err := Run(ctx, cfg, RunOptions{UntilLatest: true, ConnectTimeout: 2 * time.Second, LogOutput: logOutput()})
			took := time.Since(start)
			if err == nil {
				t.Fatal("Run succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if took > 5*time.Second {
				t.Errorf("Run took %s to give up (connect timeout 2s)", took)
			}
			// Nothing is created by a start that fails (issue 30: a taken
			// NATS port failed after the table was made).
			if p, local := localPath(cfg.Table.URI); local {
				if _, err := os.Stat(filepath.Join(p, "_delta_log")); err == nil {
					t.Errorf("the failed start created the table at %s", p)
				}
			}
		})
	}
}

// silentAddr is a listener that takes connections and never answers: a
// broker that hangs.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return l.Addr().String()
}

// TestUntilLatestSummary: --until-latest ends with one line saying what it
// did, and leaves the group without franz-go's "were we kicked from the
// group?" (a group offset commit answered after the leave).
func TestUntilLatestSummary(t *testing.T) {
	cluster := newCluster(t)
	brokers := cluster.ListenAddrs()
	produce(t, brokers, 3000, 1)
	cfg := testConfig(t, brokers)
	cfg.Log.Level = "info"
	for i := range 3 {
		if i > 0 {
			produce(t, brokers, 500, int64(i+1))
		}
		var logs testenv.SyncBuffer
		if err := Run(t.Context(), cfg, RunOptions{UntilLatest: true, LogOutput: &logs}); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		if strings.Contains(out, "kicked") || strings.Contains(out, "level=WARN") {
			t.Errorf("warnings at stop:\n%s", out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		rows := 3000
		if i > 0 {
			rows = 500
		}
		summary := fmt.Sprintf(`msg="caught up: %d rows in \d+ commits, 0 dead letters, \d+\.\ds" rows=%d commits=\d+ dead_letters=0 seconds=`, rows, rows)
		if !regexp.MustCompile(summary).MatchString(last) {
			t.Errorf("run %d: last line is no summary of %d rows: %s", i, rows, last)
		}
	}
	if n, _ := tableRecords(t, cfg.Table.URI); n != 4000 {
		t.Errorf("table holds %d records, want 4000", n)
	}
}
