package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/ledger"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const topic = "sensor-events"

// newCluster starts a one-broker kfake cluster with a 3-partition topic.
func newCluster(t *testing.T) Config {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return Config{Brokers: c.ListenAddrs(), Group: "g-" + t.Name()}
}

// seed produces counts[p] records to partition p; values are "p/offset".
func seed(t *testing.T, cfg Config, counts map[int32]int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for p, n := range counts {
		for range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d", p)})
		}
	}
	if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// handler is a Handler that returns fixed start offsets and records calls.
type handler struct {
	start map[int32]int64

	mu       sync.Mutex
	assigned []int32
	revoked  []int32
	err      error // returned once by Assigned
}

func (h *handler) Assigned(_ context.Context, _ string, ps []int32) (map[int32]int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.err; err != nil {
		h.err = nil
		return nil, err
	}
	h.assigned = append(h.assigned, ps...)
	out := make(map[int32]int64)
	for _, p := range ps {
		if o, ok := h.start[p]; ok {
			out[p] = o
		}
	}
	return out, nil
}

func (h *handler) Revoked(_ context.Context, _ string, ps []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revoked = append(h.revoked, ps...)
}

func (h *handler) calls() (assigned, revoked []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.assigned), slices.Clone(h.revoked)
}

func newConsumer(t *testing.T, cfg Config, h Handler) *Consumer {
	t.Helper()
	c, err := NewConsumer(cfg, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// offsets collects, per partition, the offsets of the records polled.
type offsets map[int32][]int64

func (o offsets) add(bs []Batch) {
	for _, b := range bs {
		for _, r := range b.Records {
			if r.Partition != b.Partition || r.Topic != b.Topic {
				panic("record in the wrong batch")
			}
			o[b.Partition] = append(o[b.Partition], r.Offset)
		}
	}
}

func (o offsets) total() (n int) {
	for _, os := range o {
		n += len(os)
	}
	return n
}

// pollUntil polls c until done(got) or the timeout; Poll errors fail the test.
func pollUntil(t *testing.T, c *Consumer, timeout time.Duration, done func(offsets) bool) offsets {
	t.Helper()
	got := offsets{}
	deadline := time.Now().Add(timeout)
	for !done(got) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; polled %v", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		bs, err := c.Poll(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Poll: %v", err)
		}
		got.add(bs)
	}
	return got
}

func seq(from, to int64) []int64 {
	var s []int64
	for o := from; o < to; o++ {
		s = append(s, o)
	}
	return s
}

func TestGroupStartsAtHandlerOffsets(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 10, 1: 10, 2: 10})
	// The group's committed offsets must be ignored: the Delta log rules.
	adm := kadm.NewClient(mustClient(t, cfg))
	var committed kadm.Offsets
	for p := range int32(3) {
		committed.Add(kadm.Offset{Topic: topic, Partition: p, At: 8, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(t.Context(), cfg.Group, committed); err != nil {
		t.Fatal(err)
	}

	h := &handler{start: map[int32]int64{0: 5, 1: -1}} // 2: absent, also "no offset"
	c := newConsumer(t, cfg, h)
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 5+10+10 })
	want := offsets{0: seq(5, 10), 1: seq(0, 10), 2: seq(0, 10)}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("polled %v, want %v", got, want)
	}
	if a, _ := h.calls(); !slices.Equal(a, []int32{0, 1, 2}) {
		t.Errorf("Assigned(%v), want [0 1 2]", a)
	}
}

func TestAssignErrorIsReportedAndRetried(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 3})
	errBoom := errors.New("delta log unreadable")
	h := &handler{err: errBoom}
	c := newConsumer(t, cfg, h)
	var sawErr bool
	got := offsets{}
	deadline := time.Now().Add(15 * time.Second)
	for got.total() < 3 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		bs, err := c.Poll(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			if !errors.Is(err, errBoom) {
				t.Fatalf("Poll: %v, want %v", err, errBoom)
			}
			sawErr = true
		}
		got.add(bs)
	}
	if !sawErr {
		t.Error("Poll never reported the failed assignment")
	}
	if got.total() != 3 {
		t.Errorf("after the rejoin polled %v, want 3 records of partition 0", got)
	}
}

func TestRevokedWhenSecondMemberJoins(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 1, 1: 1, 2: 1})
	h1, h2 := &handler{}, &handler{}
	c1 := newConsumer(t, cfg, h1)
	pollUntil(t, c1, 10*time.Second, func(offsets) bool { return len(c1.Owned()) == 3 })

	c2 := newConsumer(t, cfg, h2)
	// Rebalances run only inside Poll: both members keep polling.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = c2.Poll(ctx)
		}
	})
	pollUntil(t, c1, 20*time.Second, func(offsets) bool {
		return len(c1.Owned()) > 0 && len(c2.Owned()) > 0 && len(c1.Owned())+len(c2.Owned()) == 3
	})
	cancel()
	wg.Wait()

	_, r1 := h1.calls()
	a2, _ := h2.calls()
	if len(r1) == 0 {
		t.Fatal("Revoked not called on the first member")
	}
	// Whatever moved to the second member was revoked from the first first.
	for _, p := range a2 {
		if !slices.Contains(r1, p) {
			t.Errorf("partition %d assigned to member 2 but never revoked from member 1 (revoked %v)", p, r1)
		}
	}
	if o1, o2 := c1.Owned(), c2.Owned(); len(slices.Concat(o1, o2)) != 3 {
		t.Errorf("owned %v and %v, want a split of [0 1 2]", o1, o2)
	}
}

// A static member (kafka.instance_id) restarted after a crash replaces its
// dead predecessor in the group and gets its partitions back, instead of a
// second member that waits for the dead one's session to time out.
func TestStaticMemberRestartTakesItsPartitionsBack(t *testing.T) {
	cfg := newCluster(t)
	cfg.InstanceID = "pi-1"
	seed(t, cfg, map[int32]int{0: 1, 1: 1, 2: 1})
	members := func() []kadm.DescribedGroupMember {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		groups, err := kadm.NewClient(cl).DescribeGroups(t.Context(), cfg.Group)
		if err != nil {
			t.Fatal(err)
		}
		return groups[cfg.Group].Members
	}
	c1 := newConsumer(t, cfg, &handler{})
	pollUntil(t, c1, 10*time.Second, func(offsets) bool { return len(c1.Owned()) == 3 })
	first := members()
	if len(first) != 1 || first[0].InstanceID == nil || *first[0].InstanceID != cfg.InstanceID {
		t.Fatalf("group members %+v, want one with instance id %q", first, cfg.InstanceID)
	}
	c1.Close() // a static member does not leave: the group still counts it

	c2 := newConsumer(t, cfg, &handler{})
	got := pollUntil(t, c2, 30*time.Second, func(o offsets) bool { return len(c2.Owned()) == 3 && o.total() == 3 })
	if m := members(); len(m) != 1 || m[0].MemberID == first[0].MemberID {
		t.Fatalf("group members %+v after the restart, want the new member alone in place of %s", m, first[0].MemberID)
	}
	if !maps.EqualFunc(got, offsets{0: {0}, 1: {0}, 2: {0}}, slices.Equal) {
		t.Errorf("restarted member polled %v, want every record once", got)
	}
}

func TestPauseResume(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 5, 1: 5, 2: 5})
	c := newConsumer(t, cfg, &handler{})
	// What the client had fetched before the pause, Pause returns.
	bs, err := c.Pause(ledger.TP{Topic: topic, Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	early := offsets{}
	early.add(bs)
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(early[0])+len(o[0]) == 5 && len(early[2])+len(o[2]) == 5 })
	// A few more polls: partition 1 stays silent while paused.
	more := pollUntil(t, c, 10*time.Second, func() func(offsets) bool {
		n := 0
		return func(offsets) bool { n++; return n > 3 }
	}())
	if len(got[1])+len(more[1]) != 0 {
		t.Fatalf("paused partition 1 returned %v %v", got[1], more[1])
	}
	seed(t, cfg, map[int32]int{0: 1})
	got = pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(o[0]) == 1 })
	if len(got[1]) != 0 {
		t.Fatalf("paused partition 1 returned %v", got[1])
	}
	c.Resume(ledger.TP{Topic: topic, Partition: 1})
	paused := int64(len(early[1]))
	got = pollUntil(t, c, 10*time.Second, func(o offsets) bool { return int64(len(o[1])) == 5-paused })
	if !slices.Equal(early[1], seq(0, paused)) || !slices.Equal(got[1], seq(paused, 5)) {
		t.Errorf("Pause returned %v and after Resume polled %v of partition 1, want 0..4 once", early[1], got[1])
	}
}

// TestPauseReturnsWhatWasFetched: franz-go drops what it had fetched of a
// paused partition, and fetches it again, decompressing it again, once it
// is resumed (the fetch loop pauses a table's partitions each time its
// memory budget fills: docs/performance.md, "Several tables"). Pause
// returns it instead, with what the client held of the other partitions:
// every record comes once, from a poll or from Pause, and none that Pause
// returned is fetched again.
func TestPauseReturnsWhatWasFetched(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	type fetchAt struct {
		partition int32
		offset    int64
	}
	var mu sync.Mutex
	var asked []fetchAt
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				asked = append(asked, fetchAt{rp.Partition, rp.FetchOffset})
			}
		}
		return nil, nil, false
	})
	cfg := Config{Brokers: cluster.ListenAddrs(), Group: "g-" + t.Name(), MaxPollRecords: 1}
	seed(t, cfg, map[int32]int{0: 100, 1: 100, 2: 100})
	c := newConsumer(t, cfg, &handler{})
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 1 })
	// A fetch of one or more partitions' records (a batch each) held.
	for deadline := time.Now().Add(5 * time.Second); c.cl.BufferedFetchRecords() < 99; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d records buffered", c.cl.BufferedFetchRecords())
		}
		time.Sleep(10 * time.Millisecond)
	}
	held := c.cl.BufferedFetchRecords()
	all := []ledger.TP{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}, {Topic: topic, Partition: 2}}
	bs, err := c.Pause(all...)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	before := len(asked)
	mu.Unlock()
	paused := offsets{}
	paused.add(bs)
	if int64(paused.total()) != held {
		t.Fatalf("Pause returned %d records; want the %d the client held", paused.total(), held)
	}
	for p, os := range paused {
		got[p] = append(got[p], os...)
	}
	if _, err := c.Resume(all...); err != nil {
		t.Fatal(err)
	}
	for p, os := range pollUntil(t, c, 10*time.Second, func(o offsets) bool { return got.total()+o.total() == 300 }) {
		got[p] = append(got[p], os...)
	}
	for p := range int32(3) {
		if !slices.Equal(got[p], seq(0, 100)) {
			t.Errorf("partition %d: got offsets %v; want 0..99 once", p, got[p])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range asked[before:] {
		if os := paused[f.partition]; len(os) > 0 && f.offset <= os[len(os)-1] {
			t.Errorf("partition %d fetched at %d after Pause returned its records %d..%d", f.partition, f.offset, os[0], os[len(os)-1])
		}
	}
}

func TestSeekDiscardsBufferedFetches(t *testing.T) {
	cfg := newCluster(t)
	cfg.MaxPollRecords = 1 // keep almost everything buffered in the client
	seed(t, cfg, map[int32]int{0: 100, 1: 100, 2: 100})
	c := newConsumer(t, cfg, &handler{start: map[int32]int64{2: 20}})
	first := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 1 })
	// Wait until a fetch is buffered (one partition's records — 100 of 0 or
	// 1, 80 of 2 from its start at 20 — or all three: franz-go holds one
	// fetch per broker until it is polled, and which partitions it holds
	// depends on when each was positioned; the first poll took one), then
	// jump forward on 0 and 1 and back on 2.
	for deadline := time.Now().Add(5 * time.Second); c.cl.BufferedFetchRecords() < 79; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d records buffered", c.cl.BufferedFetchRecords())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Seek(ledger.Of(topic, map[int32]int64{0: 50, 1: 60, 2: 7}))
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 50+40+93 })
	want := offsets{0: seq(50, 100), 1: seq(60, 100), 2: seq(7, 100)}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("after Seek polled %v, want %v (first poll %v)", got, want, first)
	}

	// -1 returns to where the partition started on assignment.
	c.Seek(ledger.Of(topic, map[int32]int64{2: -1}))
	got = pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 80 })
	if !slices.Equal(got[2], seq(20, 100)) {
		t.Errorf("after Seek(-1) polled %v", got)
	}
}

func TestFixedPartitions(t *testing.T) {
	cfg := newCluster(t)
	cfg.Mode, cfg.Partitions = ModePartitions, []int32{0, 2}
	seed(t, cfg, map[int32]int{0: 5, 1: 5, 2: 5})
	h := &handler{start: map[int32]int64{0: 3}}
	c := newConsumer(t, cfg, h)
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 2+5 })
	want := offsets{0: seq(3, 5), 2: seq(0, 5)}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("polled %v, want %v", got, want)
	}
	if a, _ := h.calls(); !slices.Equal(a, []int32{0, 2}) {
		t.Errorf("Assigned(%v), want [0 2]", a)
	}
	c.Seek(ledger.Of(topic, map[int32]int64{0: 1}))
	got = pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 4 })
	if !slices.Equal(got[0], seq(1, 5)) {
		t.Errorf("after Seek polled %v", got)
	}
}

func TestHighWatermarksAndLag(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 7, 2: 3})
	c := newConsumer(t, cfg, &handler{start: map[int32]int64{0: 2}})
	hw, err := c.EndOffsets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := ledger.Of(topic, map[int32]int64{0: 7, 1: 0, 2: 3}); !maps.Equal(hw, want) {
		t.Errorf("EndOffsets = %v, want %v", hw, want)
	}
	pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(c.Owned()) == 3 })
	// MaxPollRecords would stop part-way; read everything then check lag.
	pollUntil(t, c, 10*time.Second, func(o offsets) bool {
		lag, err := c.Lag(t.Context())
		return err == nil && maps.Equal(lag, ledger.Of(topic, map[int32]int64{0: 0, 1: 0, 2: 0}))
	})
	seed(t, cfg, map[int32]int{1: 4})
	lag, err := c.Lag(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := ledger.Of(topic, map[int32]int64{0: 0, 1: 4, 2: 0}); !maps.Equal(lag, want) {
		t.Errorf("Lag = %v, want %v", lag, want)
	}
}

func TestCommitOffsetsVisibleToKadm(t *testing.T) {
	for _, mode := range []string{ModeGroup, ModePartitions} {
		t.Run(mode, func(t *testing.T) {
			cfg := newCluster(t)
			cfg.Mode = mode
			if mode == ModePartitions {
				cfg.Partitions = []int32{0, 1, 2}
			}
			seed(t, cfg, map[int32]int{0: 5, 1: 5})
			c := newConsumer(t, cfg, &handler{})
			pollUntil(t, c, 10*time.Second, func(o offsets) bool { return o.total() == 10 })
			if err := c.CommitOffsets(t.Context(), ledger.Of(topic, map[int32]int64{0: 5, 1: 3})); err != nil {
				t.Fatal(err)
			}
			fetched, err := kadm.NewClient(mustClient(t, cfg)).FetchOffsets(t.Context(), cfg.Group)
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range map[int32]int64{0: 5, 1: 3} {
				if o, ok := fetched.Lookup(topic, p); !ok || o.At != want || o.Err != nil {
					t.Errorf("partition %d: committed %+v, want %d", p, o, want)
				}
			}
		})
	}
}

func mustClient(t *testing.T, cfg Config) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestCloseRevokesAndEndsPoll(t *testing.T) {
	cfg := newCluster(t)
	h := &handler{}
	c := newConsumer(t, cfg, h)
	pollUntil(t, c, 10*time.Second, func(offsets) bool { return len(c.Owned()) == 3 })
	done := make(chan error)
	go func() {
		_, err := c.Poll(t.Context())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Poll during Close: %v, want ErrClosed", err)
	}
	if _, r := h.calls(); !slices.Equal(r, []int32{0, 1, 2}) {
		t.Errorf("Close revoked %v, want [0 1 2]", r)
	}
	if _, err := c.Poll(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
}

// watcher is a handler that is also a BrokerWatcher.
type watcher struct {
	handler
	mu       sync.Mutex
	ok, fail int
}

func (w *watcher) BrokerDialed(_ string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.fail++
	} else {
		w.ok++
	}
}

func (w *watcher) dials() (ok, fail int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok, w.fail
}

// A Handler that is a BrokerWatcher hears of each connection to a broker:
// failed ones while no broker answers, successful ones when it does.
func TestBrokerWatcher(t *testing.T) {
	cfg := newCluster(t)
	up := &watcher{}
	c := newConsumer(t, cfg, up)
	pollUntil(t, c, 10*time.Second, func(offsets) bool { ok, _ := up.dials(); return ok > 0 })
	if _, fail := up.dials(); fail != 0 {
		t.Errorf("%d failed dials to a running broker", fail)
	}

	down := &watcher{}
	c = newConsumer(t, Config{Brokers: []string{"127.0.0.1:1"}, Group: "g-down"}, down)
	deadline := time.Now().Add(10 * time.Second)
	for _, fail := down.dials(); fail == 0; _, fail = down.dials() {
		if time.Now().After(deadline) {
			t.Fatal("no failed dial reported for a broker that is not there")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, _ = c.Poll(ctx)
		cancel()
	}
	if ok, _ := down.dials(); ok != 0 {
		t.Errorf("%d successful dials to nothing", ok)
	}
}

// deleteRecords moves partition p's log start to at (retention, DeleteRecords).
func deleteRecords(t *testing.T, cfg Config, p int32, at int64) {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: at})
	res, err := kadm.NewClient(mustClient(t, cfg)).DeleteRecords(t.Context(), os)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestOffsetBelowLogStartIsNotReset: a start offset retention has deleted
// is never reset silently to the log start (today's 15 lost records): Poll
// reports OFFSET_OUT_OF_RANGE for the partition and returns none of its
// records, so the engine can decide.
func TestOffsetBelowLogStartIsNotReset(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 60, 1: 5})
	deleteRecords(t, cfg, 0, 45)
	c := newConsumer(t, cfg, &handler{start: map[int32]int64{0: 30}})
	got := offsets{}
	var outOfRange bool
	deadline := time.Now().Add(10 * time.Second)
	for (!outOfRange || len(got[1]) < 5) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		bs, err := c.Poll(ctx)
		cancel()
		got.add(bs)
		var pe *PartitionError
		if errors.As(err, &pe) && pe.Partition == 0 && errors.Is(err, kerr.OffsetOutOfRange) {
			outOfRange = true
		}
	}
	if !outOfRange || len(got[0]) != 0 || len(got[1]) != 5 {
		t.Fatalf("out of range reported: %v; polled %v; want no record of partition 0 and all 5 of partition 1", outOfRange, got)
	}
}

// TestHeldPartition: a partition the handler holds is not fetched, also
// across Pause/Resume, until a Seek gives it an offset.
func TestHeldPartition(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 5, 1: 5, 2: 5})
	c := newConsumer(t, cfg, &handler{start: map[int32]int64{1: ledger.Held}})
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(o[0]) == 5 && len(o[2]) == 5 })
	all := []ledger.TP{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}, {Topic: topic, Partition: 2}}
	c.Pause(all...)
	c.Resume(all...)
	seed(t, cfg, map[int32]int{0: 1})
	more := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(o[0]) == 1 })
	if len(got[1])+len(more[1]) != 0 {
		t.Fatalf("held partition 1 returned %v %v", got[1], more[1])
	}
	c.Seek(ledger.Of(topic, map[int32]int64{1: 2}))
	got = pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(o[1]) == 3 })
	if !slices.Equal(got[1], seq(2, 5)) {
		t.Fatalf("released partition 1 returned %v, want offsets 2-4", got[1])
	}
}

// seekingHandler is a handler that, inside Assigned, makes the seeks the
// poll loop makes when the engine tells it of an assignment before the
// consumer has recorded it.
type seekingHandler struct {
	handler
	c    atomic.Pointer[Consumer]
	seek map[ledger.TP]int64
}

func (h *seekingHandler) Assigned(ctx context.Context, topic string, ps []int32) (map[int32]int64, error) {
	h.c.Load().Seek(h.seek)
	return h.handler.Assigned(ctx, topic, ps)
}

// TestSeekWhileAssigning: a seek of a partition whose assignment is being
// settled is where it starts (it was ignored, with a warning, and the
// partition started where the handler said).
func TestSeekWhileAssigning(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 10, 1: 10, 2: 10})
	h := &seekingHandler{
		handler: handler{start: map[int32]int64{0: 2, 1: 2, 2: ledger.Held}},
		seek:    ledger.Of(topic, map[int32]int64{0: 5, 1: ledger.Held, 2: 7}),
	}
	var logs testenv.SyncBuffer
	c, err := NewConsumer(cfg, h, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	h.c.Store(c)
	got := pollUntil(t, c, 10*time.Second, func(o offsets) bool { return len(o[0]) == 5 && len(o[2]) == 3 })
	want := offsets{0: seq(5, 10), 2: seq(7, 10)}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("polled %v, want %v (partition 1 held)", got, want)
	}
	if strings.Contains(logs.String(), "not owned") {
		t.Errorf("the seek was ignored:\n%s", logs.String())
	}
}

// TestTopicLogs: the log ranges follow DeleteRecords, and a recreated
// topic shows a new ID at once (not the client's cached one).
func TestTopicLogs(t *testing.T) {
	cfg := newCluster(t)
	seed(t, cfg, map[int32]int{0: 60, 2: 3})
	deleteRecords(t, cfg, 0, 45)
	c := newConsumer(t, cfg, &handler{})
	logs, err := c.TopicLogs(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]ledger.LogRange{0: {Start: 45, End: 60}, 1: {Start: 0, End: 0}, 2: {Start: 0, End: 3}}
	if !maps.Equal(logs.Ranges, want) || logs.ID == "" || logs.Topic != topic {
		t.Fatalf("logs %+v, want ranges %v and an ID", logs, want)
	}
	adm := kadm.NewClient(mustClient(t, cfg))
	if _, err := adm.DeleteTopics(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopics(t.Context(), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	again, err := c.TopicLogs(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == logs.ID || again.ID == "" || len(again.Ranges) != 2 {
		t.Fatalf("after recreation: %+v; want a new ID and 2 partitions (was %s)", again, logs.ID)
	}
}
