package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// daemonChild is the daemon (an e2e stage child) on a fresh topic and table, run
// until stopped: latency and steady mode feed it at a steady rate.
type daemonChild struct {
	topic, table string
	appID        string        // the table's txn appId prefix
	flush        time.Duration // the daemon's flush interval
	c            *child
	childCtx     context.Context
	stopChild    context.CancelFunc
}

// startDaemon creates the topic, starts the daemon with the options' NATS,
// table store and configuration (set adjusts its arguments) and waits until
// its partitions are assigned.
func startDaemon(ctx context.Context, o Options, k *kafkaEnv, mode string, set func(*stageArgs)) (*daemonChild, error) {
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	d := &daemonChild{topic: k.prefix + mode + "-" + nonce, table: filepath.Join(o.Dir, mode+"-"+nonce)}
	if strings.HasPrefix(o.Table, "s3://") || strings.HasPrefix(o.Table, "s3a://") {
		d.table = strings.TrimSuffix(o.Table, "/") + "/bench-" + mode + "-" + nonce
	}
	base, err := daemon.Load(o.Config, os.Getenv)
	if err != nil {
		return nil, err
	}
	d.appID = base.Table.AppID
	if d.flush = o.FlushInterval; d.flush <= 0 {
		d.flush = base.Flush.Interval
	}
	a := stageArgs{stage: StageE2E, brokers: strings.Join(k.brokers, ","), topic: d.topic, group: "bench-" + mode + "-" + nonce,
		table: d.table, natsDir: natsDirFor(o.Dir, mode+"-"+nonce), natsURL: o.NATSURL, flush: o.FlushInterval,
		s3: s3FlagsOf(o.S3), config: o.Config}
	if set != nil {
		set(&a)
	}
	for _, t := range tableTopics(d.topic, a.tables) {
		if err := k.createTopic(ctx, t, o.Partitions); err != nil {
			return nil, err
		}
	}
	assigned := make(chan struct{})
	d.c, err = startChild(append(slices.Clone(o.Self), a.args()...), append(slices.Clone(o.ChildEnv), a.env()...), filepath.Join(o.Dir, mode+"-"+nonce+".log"),
		func(time.Time) { close(assigned) })
	if err != nil {
		return nil, err
	}
	d.childCtx, d.stopChild = context.WithCancel(ctx)
	select {
	case <-assigned:
		return d, nil
	case <-d.c.readDone:
		return nil, d.abort(fmt.Errorf("daemon exited before partitions were assigned (log: %s)", d.c.stderr.Name()))
	case <-time.After(time.Minute):
		return nil, d.abort(fmt.Errorf("no partitions assigned within a minute (log: %s)", d.c.stderr.Name()))
	}
}

func (d *daemonChild) pid() int { return d.c.cmd.Process.Pid }

// abort stops the daemon and returns err.
func (d *daemonChild) abort(err error) error {
	d.stopChild()
	d.c.wait(d.childCtx)
	return err
}

// stop stops the daemon gracefully (SIGTERM) and returns what it measured.
func (d *daemonChild) stop() (*stageRun, error) {
	d.stopChild()
	return d.c.wait(d.childCtx)
}

// sleep waits for dur while the daemon runs; an error when it exits.
func (d *daemonChild) sleep(ctx context.Context, dur time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-d.c.readDone:
		return fmt.Errorf("daemon exited early (log: %s)", d.c.stderr.Name())
	case <-time.After(dur):
		return nil
	}
}

// waitCommitted waits until the table holds rows rows: about one flush
// interval after the last record was produced.
func (d *daemonChild) waitCommitted(ctx context.Context, o Options, rows int64) (*tableSummary, error) {
	deadline := time.Now().Add(2*d.flush + time.Minute)
	for {
		sum, err := summarize(ctx, d.table, o.S3)
		if err == nil && sum.Rows >= rows {
			return sum, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d of %d rows committed by the deadline", sum.Rows, rows)
			}
			return nil, err
		}
		if err := d.sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
