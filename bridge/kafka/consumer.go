package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deltaflow/deltaflow/ledger"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrClosed is returned by Poll once the consumer is closed.
var ErrClosed = errors.New("kafka: consumer closed")

// Handler is implemented by the engine: it tells the consumer where each
// partition starts and hears when one is taken away. Both methods are called
// from franz-go's group goroutine (in mode "partitions", Assigned is called
// from the first Poll), possibly while Poll runs; they must not wait for the
// goroutine that calls Poll.
type Handler interface {
	// Assigned is called when partitions are assigned (group mode) or at
	// start (fixed mode); it returns the next offset to read for each
	// partition (from the Delta log's txn versions: version+1), -1 for "the
	// log start", or [ledger.Held] for "do not read it". A partition missing from
	// the map counts as -1. An error fails the assignment: the member
	// rejoins the group and Poll reports the error.
	Assigned(ctx context.Context, topic string, partitions []int32) (map[int32]int64, error)
	// Revoked is called before partitions are taken away (or lost): the
	// engine drops their uncommitted epoch. Once it returns, Poll returns no
	// more records of these partitions. Close revokes every partition.
	Revoked(ctx context.Context, topic string, partitions []int32)
}

// BrokerWatcher may be implemented by a Handler that wants to know whether
// the brokers can be reached (the engine says so on /readyz): BrokerDialed
// is called after each attempt to connect to a broker, with the dial's
// error (nil: connected). franz-go connects lazily and keeps connections
// open, so while a broker is down every retry reports its error, and the
// first success after an outage reports nil.
type BrokerWatcher interface {
	BrokerDialed(addr string, err error)
}

// dialHook passes franz-go's connection attempts to a BrokerWatcher.
type dialHook struct{ w BrokerWatcher }

func (d dialHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	d.w.BrokerDialed(net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err)
}

// Batch is the records one Poll returns for one partition, in offset order.
type Batch struct {
	Topic     string
	Partition int32
	Records   []*kgo.Record
	// HighWatermark is the partition's end offset when the records were
	// fetched: the offset the next produced record will get.
	HighWatermark int64
}

// PartitionError is a fetch error for one partition, returned by Poll.
// franz-go stops fetching a partition after a fatal error (data loss, not
// authorized), so the engine should treat it as the partition's end.
type PartitionError struct {
	Topic     string
	Partition int32 // -1 when the error is not about one partition
	Err       error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("kafka: fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// Consumer reads the subscribed topics for the engine (by default
// [Config.Topic]; [Subscribe] names several, or patterns), starting each
// partition at the offset the Delta log holds for it (see [Handler]); the
// Kafka group's committed offsets are never used as a start position.
//
// Goroutines: Poll, Pause, Resume, Seek and Close belong to one goroutine,
// the poll loop (Pause and Resume poll what the client holds; Resume
// seeks). In group mode a rebalance is held from the moment Poll returns
// until the next Poll (or Close), so Seek between two polls never races a
// revocation; the poll loop must therefore keep calling Poll, or the
// member is evicted after the group's rebalance timeout. CommitOffsets,
// HighWatermarks and Lag are safe from any goroutine.
type Consumer struct {
	cfg Config
	sub subscription
	h   Handler
	log *slog.Logger
	cl  *kgo.Client
	adm *kadm.Client

	started   bool          // mode partitions: Assigned was called; poll goroutine only
	ready     chan struct{} // closed once cl and adm are set: the group can assign before NewClient returns
	closeOnce sync.Once

	mu    sync.Mutex
	owned map[ledger.TP]*position // partitions we read
	// assigning holds the partitions whose assignment is being settled, with
	// the seek the poll loop asked for meanwhile (unseekYet if none): the
	// handler tells the loop of them before they are owned.
	assigning map[ledger.TP]int64
	assignErr error // the last failed assignment, for Poll to report
}

// subscription is what a consumer reads: topics by name, and topics whose
// name matches a pattern (picked up as they are created, within a metadata
// refresh: [Config.MetadataMaxAge]).
type subscription struct {
	topics  []string
	regexes []string
}

// ConsumerOpt sets how a consumer is built.
type ConsumerOpt func(*subscription)

// Subscribe makes the consumer read topics and every topic matching one of
// regexes (Go regexp syntax, unanchored as Kafka's own patterns are not:
// anchor them yourself), instead of [Config.Topic]. Mode group only.
func Subscribe(topics, regexes []string) ConsumerOpt {
	return func(s *subscription) { s.topics, s.regexes = topics, regexes }
}

// consumeTopics is what franz-go subscribes to: the topics, or with a
// pattern among them, every one as a pattern (franz-go takes either).
func (s subscription) consumeTopics() (topics []string, regex bool) {
	if len(s.regexes) == 0 {
		return s.topics, false
	}
	for _, t := range s.topics {
		topics = append(topics, "^"+regexp.QuoteMeta(t)+"$")
	}
	return append(topics, s.regexes...), true
}

// position tracks where a partition started and where reading has got to.
type position struct {
	origin int64 // the offset the partition started at on assignment
	next   int64 // the next offset Poll will return
	held   bool  // not fetched: see ledger.Held
	// setAt is the offset franz-go was last set to, while no record has
	// come since (-1 else): its group consumer takes a SetOffsets to that
	// same offset as no move (see [Consumer.setOffsets]).
	setAt int64
}

// NewConsumer creates a consumer for cfg.Topic. In group mode it joins the
// group at once; Handler.Assigned is called when the group assigns
// partitions. In mode partitions, Handler.Assigned is called by the first Poll
// (with Poll's context). A nil logger discards logs.
func NewConsumer(cfg Config, h Handler, logger *slog.Logger, opts ...ConsumerOpt) (*Consumer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sub := subscription{topics: []string{cfg.Topic}}
	for _, o := range opts {
		o(&sub)
	}
	if cfg.Mode == ModePartitions && (len(sub.topics) != 1 || len(sub.regexes) > 0) {
		return nil, fmt.Errorf("kafka: mode partitions reads one topic, not %v %v", sub.topics, sub.regexes)
	}
	for _, r := range sub.regexes {
		if _, err := regexp.Compile(r); err != nil {
			return nil, fmt.Errorf("kafka: topic pattern %q: %w", r, err)
		}
	}
	c := &Consumer{cfg: cfg, sub: sub, h: h, log: logger, owned: make(map[ledger.TP]*position), assigning: make(map[ledger.TP]int64), ready: make(chan struct{})}
	kopts, err := cfg.clientOpts(logger)
	if err != nil {
		return nil, err
	}
	budget, err := newFetchBudget(int(cfg.MaxDecompressBytes))
	if err != nil {
		return nil, err
	}
	kopts = append(kopts,
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.FetchMaxBytes(cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(cfg.FetchMaxPartitionBytes),
		// Under read_committed, records of aborted transactions are never
		// ingested.
		kgo.FetchIsolationLevel(cfg.isolation()),
		// A transaction's commit or abort marker takes an offset: kept, it
		// moves the partition's position (and so the table's offset) past
		// itself, so a partition whose last offset is a marker is caught
		// up. The reader makes no row of it.
		kgo.KeepControlRecords(),
		// Poll reports a batch over kafka.max_decompress_bytes
		// (batchTooLarge), undecompressed; a fetch stops decompressing
		// at it.
		kgo.WithDecompressor(budget),
		kgo.WithHooks(budget),
		// Start positions are always explicit (see assign), and an offset
		// that has fallen out of the log is never silently reset: Poll
		// reports OFFSET_OUT_OF_RANGE for the partition, which franz-go
		// stops fetching until a Seek, and the engine decides
		// (kafka.on_data_loss).
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)
	if w, ok := h.(BrokerWatcher); ok {
		kopts = append(kopts, kgo.WithHooks(dialHook{w}))
	}
	if cfg.Mode == ModeGroup {
		topics, regex := sub.consumeTopics()
		if regex {
			kopts = append(kopts, kgo.ConsumeRegex())
		}
		kopts = append(kopts,
			kgo.ConsumerGroup(cfg.Group),
			kgo.ConsumeTopics(topics...),
			kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(),
			// Runs after the group's committed offsets are fetched:
			// we replace them all with the Delta log's.
			kgo.AdjustFetchOffsetsFn(c.adjustOffsets),
			kgo.OnPartitionsRevoked(c.revoked),
			kgo.OnPartitionsLost(c.revoked),
		)
		if cfg.InstanceID != "" {
			kopts = append(kopts, kgo.InstanceID(cfg.InstanceID))
		}
	}
	// Without a group and without ConsumePartitions, the client is a direct
	// consumer with nothing assigned: the first Poll adds the partitions
	// once the handler has said where they start.
	if c.cl, err = kgo.NewClient(kopts...); err != nil {
		return nil, fmt.Errorf("kafka: new consumer: %w", err)
	}
	c.adm = kadm.NewClient(c.cl)
	close(c.ready)
	return c, nil
}

// adjustOffsets is franz-go's AdjustFetchOffsetsFn: it replaces the group's
// committed offsets of newly assigned partitions with the handler's, topic
// by topic.
func (c *Consumer) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for _, topic := range slices.Sorted(maps.Keys(offsets)) {
		ps := slices.Sorted(maps.Keys(offsets[topic]))
		if len(ps) == 0 {
			continue
		}
		start, err := c.assign(ctx, topic, ps)
		if err != nil {
			c.log.Error("kafka: assignment failed; rejoining the group", "topic", topic, "partitions", ps, "err", err)
			c.mu.Lock()
			c.assignErr = err
			c.mu.Unlock()
			return nil, err
		}
		offsets[topic] = kgoOffsets(start)
	}
	return offsets, nil
}

// noSeek marks a partition being assigned that no Seek named.
const noSeek int64 = -3

// assign asks the handler where partitions ps of topic start, resolves "the
// log start" to a concrete offset (so Seek can return there later), holds
// what the handler holds, and records ps as owned.
func (c *Consumer) assign(ctx context.Context, topic string, ps []int32) (map[int32]int64, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	for _, p := range ps {
		c.assigning[ledger.TP{Topic: topic, Partition: p}] = noSeek
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, p := range ps {
			delete(c.assigning, ledger.TP{Topic: topic, Partition: p})
		}
		c.mu.Unlock()
	}()
	next, err := c.h.Assigned(ctx, topic, ps)
	if err != nil {
		return nil, fmt.Errorf("kafka: assign %s%v: %w", topic, ps, err)
	}
	start := make(map[int32]int64, len(ps))
	held := map[int32]bool{}
	atLogStart := false
	for _, p := range ps {
		o, ok := next[p]
		if o == ledger.Held {
			held[p] = true // placed at the log start, never fetched
		}
		if !ok || o < 0 {
			o, atLogStart = -1, true
		}
		start[p] = o
	}
	if atLogStart {
		logs, err := c.TopicLogs(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: assign %s%v: %w", topic, ps, err)
		}
		for p, o := range start {
			if o >= 0 {
				continue
			}
			r, ok := logs.Ranges[p]
			if !ok {
				return nil, fmt.Errorf("kafka: assign %s[%d]: the topic has no such partition", topic, p)
			}
			start[p] = r.Start
		}
	}
	var holding []int32
	c.mu.Lock()
	for _, p := range ps {
		tp := ledger.TP{Topic: topic, Partition: p}
		// A seek the loop asked for while the handler answered is where
		// the loop believes the partition is: it wins.
		switch o := c.assigning[tp]; {
		case o == noSeek:
		case o == ledger.Held:
			held[p] = true
		case o >= 0:
			start[p], held[p] = o, false
		default: // back to where it starts
			held[p] = false
		}
		// setAt: franz-go may hold start as a set offset.
		c.owned[tp] = &position{origin: start[p], next: start[p], held: held[p], setAt: start[p]}
		if held[p] {
			holding = append(holding, p)
		}
	}
	c.mu.Unlock()
	// Pausing before the partitions are consumed keeps a held one from
	// ever being fetched (revoked resumes it: pauses outlive assignments).
	c.cl.PauseFetchPartitions(map[string][]int32{topic: holding})
	c.log.Info("kafka: partitions assigned", "topic", topic, "start", start, "held", holding)
	return start, nil
}

// TopicLogs returns topic's ID and every partition's log range, asked of
// the brokers now (never from cached metadata: a recreated topic must show
// its new ID). Safe from any goroutine.
func (c *Consumer) TopicLogs(ctx context.Context, topic string) (ledger.TopicLogs, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return ledger.TopicLogs{}, ctx.Err()
	}
	return topicLogs(ctx, c.cl, c.adm, topic)
}

func topicLogs(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) (ledger.TopicLogs, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return ledger.TopicLogs{}, fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return ledger.TopicLogs{}, fmt.Errorf("kafka: metadata of %s: %d topics answered", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return ledger.TopicLogs{}, fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	logs := ledger.TopicLogs{Topic: topic, ID: ledger.FormatTopicID(resp.Topics[0].TopicID), Ranges: map[int32]ledger.LogRange{}}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return ledger.TopicLogs{}, fmt.Errorf("kafka: list start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return ledger.TopicLogs{}, fmt.Errorf("kafka: list end offsets of %s: %w", topic, err)
	}
	var missing error
	starts.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic || o.Partition < 0 {
			return
		}
		end, ok := ends.Lookup(topic, o.Partition)
		if !ok {
			missing = fmt.Errorf("kafka: list end offsets of %s: partition %d missing", topic, o.Partition)
			return
		}
		logs.Ranges[o.Partition] = ledger.LogRange{Start: o.Offset, End: end.Offset}
	})
	if missing != nil {
		return ledger.TopicLogs{}, missing
	}
	return logs, nil
}

func kgoOffsets(start map[int32]int64) map[int32]kgo.Offset {
	out := make(map[int32]kgo.Offset, len(start))
	for p, o := range start {
		// No leader epoch: these offsets come from the Delta log, not
		// from a fetch, so there is nothing to validate against.
		out[p] = kgo.NewOffset().At(o).WithEpoch(-1)
	}
	return out
}

// revoked is franz-go's OnPartitionsRevoked and OnPartitionsLost.
func (c *Consumer) revoked(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	for _, topic := range slices.Sorted(maps.Keys(lost)) {
		ps := lost[topic]
		if len(ps) == 0 {
			continue // franz-go calls this at the end of every group session
		}
		slices.Sort(ps)
		c.log.Info("kafka: partitions revoked", "topic", topic, "partitions", ps)
		c.h.Revoked(ctx, topic, ps)
		var held []int32
		c.mu.Lock()
		for _, p := range ps {
			tp := ledger.TP{Topic: topic, Partition: p}
			if pos := c.owned[tp]; pos != nil && pos.held {
				held = append(held, p)
			}
			delete(c.owned, tp)
		}
		c.mu.Unlock()
		// A pause outlives the assignment: one reassigned later is held
		// again only if the handler says so.
		c.cl.ResumeFetchPartitions(map[string][]int32{topic: held})
	}
}

// Poll waits for records and returns them grouped by partition; it returns
// nil and ctx.Err() when ctx ends first, [ErrClosed] after Close. It can
// return batches and an error together: the batches are good, the error
// joins [*PartitionError]s and failed assignments.
//
// Call Poll from the poll loop only. In group mode, calling Poll releases the
// rebalance held since the previous Poll returned.
func (c *Consumer) Poll(ctx context.Context) ([]Batch, error) {
	if c.cfg.Mode == ModePartitions && !c.started {
		start, err := c.assign(ctx, c.cfg.Topic, c.cfg.Partitions)
		if err != nil {
			return nil, err
		}
		c.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.cfg.Topic: kgoOffsets(start)})
		c.started = true
	}
	c.cl.AllowRebalance()
	fs := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
	if fs.IsClientClosed() {
		return nil, ErrClosed
	}
	batches, errs := c.collect(fs, ctx.Err())
	// An ended context with errors still returns them: franz-go reports a
	// batch too large once and stops its partition until a seek past it.
	if len(batches) == 0 && len(errs) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return batches, errors.Join(errs...)
}

// collect groups a poll's records by partition, moves each partition's
// position past them and returns them with the poll's errors; ended is
// the poll's context's error, if it ended, which is none.
func (c *Consumer) collect(fs kgo.Fetches, ended error) ([]Batch, []error) {
	var errs []error
	fs.EachError(func(t string, p int32, err error) {
		if ended != nil && errors.Is(err, ended) || errors.Is(err, errFetchFull) {
			return // errFetchFull: fetched again later
		}
		errs = append(errs, &PartitionError{Topic: t, Partition: p, Err: batchTooLarge(err, int64(c.cfg.MaxDecompressBytes))})
	})
	var batches []Batch
	at := make(map[ledger.TP]int) // index in batches: a partition can come in several fetches
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		tp := ledger.TP{Topic: fp.Topic, Partition: fp.Partition}
		i, ok := at[tp]
		if !ok {
			i = len(batches)
			at[tp] = i
			batches = append(batches, Batch{Topic: fp.Topic, Partition: fp.Partition})
		}
		b := &batches[i]
		b.Records = append(b.Records, fp.Records...)
		b.HighWatermark = max(b.HighWatermark, fp.HighWatermark)
	})

	c.mu.Lock()
	for _, b := range batches {
		if pos := c.owned[ledger.TP{Topic: b.Topic, Partition: b.Partition}]; pos != nil {
			pos.next, pos.setAt = b.Records[len(b.Records)-1].Offset+1, -1
		}
	}
	if c.assignErr != nil {
		errs = append(errs, c.assignErr)
		c.assignErr = nil
	}
	c.mu.Unlock()
	return batches, errs
}

// Pause stops fetching partitions (backpressure) until Resume, and returns
// what the client had fetched and not returned yet, of every partition, as
// Poll would (without waiting): franz-go drops what it holds of a paused
// partition, and fetches it again, decompressing it again, once resumed,
// so the caller keeps those records instead and hands them out first when
// it resumes the partition; Kafka continues after them. Pausing right
// after taking them leaves franz-go little time to send a fetch that
// includes the partitions (one it does is dropped, as before). Call it
// from the poll loop, between two Polls, as Seek.
func (c *Consumer) Pause(tps ...ledger.TP) ([]Batch, error) {
	fs := c.cl.PollRecords(nil, -1) // nil: what is buffered, at once
	c.cl.PauseFetchPartitions(byTopic(tps))
	return c.taken(fs)
}

// taken is what Pause and Resume return of a poll of what was buffered.
func (c *Consumer) taken(fs kgo.Fetches) ([]Batch, error) {
	if fs.IsClientClosed() {
		return nil, ErrClosed
	}
	batches, errs := c.collect(fs, nil)
	return batches, errors.Join(errs...)
}

// Resume undoes Pause, except for held partitions (see [ledger.Held]). The
// partitions are fetched again once the fetch in flight returns (within
// fetch_max_wait), each from the next offset Poll returns: franz-go drops
// a paused partition's buffered fetch at the next poll, and when that fetch
// was a batch too large (reported once), the partition stays stopped until
// a seek. A seek drops what the client had fetched of every partition, so
// Resume first takes it and returns it, as Pause does. Call it from the
// poll loop, between two Polls, as Seek.
func (c *Consumer) Resume(tps ...ledger.TP) ([]Batch, error) {
	batches, err := c.taken(c.cl.PollRecords(nil, -1))
	var set offsetSet
	c.mu.Lock()
	tps = slices.DeleteFunc(slices.Clone(tps), func(tp ledger.TP) bool {
		pos := c.owned[tp]
		if pos == nil || pos.held {
			return pos != nil
		}
		if pos.next >= 0 { // else not started yet: nothing fetched to lose
			set.add(tp, pos, pos.next)
		}
		return false
	})
	c.mu.Unlock()
	c.setOffsets(set)
	c.cl.ResumeFetchPartitions(byTopic(tps))
	return batches, err
}

// MaxPollRecords is the most records one Poll returns
// ([Config.MaxPollRecords]).
func (c *Consumer) MaxPollRecords() int { return c.cfg.MaxPollRecords }

// offsetSet is what [Consumer.setOffsets] moves partitions to: at, and
// first away for the partitions franz-go would not move otherwise.
type offsetSet struct {
	at, away map[string]map[int32]kgo.EpochOffset
}

// add moves tp to o, and updates its position (pos, under c.mu).
func (s *offsetSet) add(tp ledger.TP, pos *position, o int64) {
	if pos.setAt == o {
		s.away = setAt(s.away, tp, o+1) // any other offset
	}
	s.at = setAt(s.at, tp, o)
	pos.next, pos.setAt = o, o
}

// setOffsets moves the partitions of set. franz-go's group consumer takes a
// SetOffsets to the offset it was last set to, with no record returned
// since, as no move, and so leaves stopped a partition it stopped at a
// batch too large whose report a SetOffsets dropped (each drops every
// partition's buffered fetches): such a partition is set to another offset
// first, which the second SetOffsets drops before anything is returned.
// Call from the poll loop, without c.mu.
func (c *Consumer) setOffsets(set offsetSet) {
	if len(set.away) > 0 {
		c.cl.SetOffsets(set.away)
	}
	if len(set.at) > 0 {
		c.cl.SetOffsets(set.at)
	}
}

// setAt adds partition tp at offset o to set, as SetOffsets takes them,
// and returns set, made if nil.
func setAt(set map[string]map[int32]kgo.EpochOffset, tp ledger.TP, o int64) map[string]map[int32]kgo.EpochOffset {
	if set == nil {
		set = map[string]map[int32]kgo.EpochOffset{}
	}
	if set[tp.Topic] == nil {
		set[tp.Topic] = map[int32]kgo.EpochOffset{}
	}
	set[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o}
	return set
}

// byTopic groups partitions by topic, as franz-go takes them.
func byTopic(tps []ledger.TP) map[string][]int32 {
	out := map[string][]int32{}
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	return out
}

// Seek makes the partitions continue at the given offsets, typically the
// committed ones after an aborted epoch. Everything already fetched and not
// yet returned is discarded, so the next record Poll returns for a partition
// is the one at its new offset. An offset of -1 returns to where the
// partition started on assignment; [ledger.Held] holds the partition, and
// any other offset releases a held one. A partition being assigned starts
// there; others not owned are ignored. Call from the poll loop, between two
// Polls.
func (c *Consumer) Seek(offsets map[ledger.TP]int64) {
	var set offsetSet
	var hold, release []ledger.TP
	c.mu.Lock()
	for tp, o := range offsets {
		pos := c.owned[tp]
		if _, ok := c.assigning[tp]; ok && pos == nil {
			c.assigning[tp] = o // applied when the assignment settles
			continue
		}
		if pos == nil {
			c.log.Warn("kafka: seek on a partition not owned; ignored", "topic", tp.Topic, "partition", tp.Partition, "offset", o)
			continue
		}
		if o == ledger.Held {
			if !pos.held {
				hold = append(hold, tp)
			}
			pos.held = true
			continue
		}
		if pos.held {
			release = append(release, tp)
		}
		pos.held = false
		if o < 0 {
			o = pos.origin
		}
		set.add(tp, pos, o)
	}
	c.mu.Unlock()
	if len(hold) > 0 {
		c.cl.PauseFetchPartitions(byTopic(hold))
		c.log.Info("kafka: partitions held (not fetched)", "partitions", hold)
	}
	c.setOffsets(set)
	if len(release) > 0 {
		c.cl.ResumeFetchPartitions(byTopic(release))
		c.log.Info("kafka: held partitions released", "partitions", release)
	}
}

// CommitOffsets commits, for lag tools only, the next offset to read of each
// partition (the last ingested offset + 1) to the group. Safe from any
// goroutine. In group mode a commit racing a rebalance can fail with a group
// error; that is harmless since these offsets are never read back.
func (c *Consumer) CommitOffsets(ctx context.Context, next map[ledger.TP]int64) error {
	if len(next) == 0 {
		return nil
	}
	if c.cfg.Mode == ModeGroup {
		eo := map[string]map[int32]kgo.EpochOffset{}
		for tp, o := range next {
			if eo[tp.Topic] == nil {
				eo[tp.Topic] = map[int32]kgo.EpochOffset{}
			}
			eo[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
		var errs []error
		c.cl.CommitOffsetsSync(ctx, eo,
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err != nil {
					errs = append(errs, err)
					return
				}
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
							errs = append(errs, fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, err))
						}
					}
				}
			})
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("kafka: commit group %s offsets: %w", c.cfg.Group, err)
		}
		return nil
	}
	// Mode partitions has no group membership: commit as an admin, which
	// Kafka accepts for a group without active members.
	var os kadm.Offsets
	for tp, o := range next {
		os.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: o, LeaderEpoch: -1})
	}
	resp, err := c.adm.CommitOffsets(ctx, c.cfg.Group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: commit group %s offsets: %w", c.cfg.Group, err)
	}
	return nil
}

// EndOffsets returns, for every partition of the topics subscribed by name
// and those this consumer owns partitions of, the offset reading can reach
// now: the last stable
// offset under read_committed (records of a transaction still open wait
// for its end), the high watermark (the offset of the next record
// produced) under read_uncommitted. Safe from any goroutine.
func (c *Consumer) EndOffsets(ctx context.Context) (map[ledger.TP]int64, error) {
	list := c.adm.ListEndOffsets
	if c.cfg.IsolationLevel == ReadCommitted {
		list = c.adm.ListCommittedOffsets
	}
	topics := map[string]bool{}
	for _, t := range c.sub.topics {
		topics[t] = true
	}
	c.mu.Lock()
	for tp := range c.owned {
		topics[tp.Topic] = true
	}
	c.mu.Unlock()
	if len(topics) == 0 {
		return map[ledger.TP]int64{}, nil
	}
	return endOffsets(ctx, list, slices.Sorted(maps.Keys(topics))...)
}

func endOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topics ...string) (map[ledger.TP]int64, error) {
	listed, err := list(ctx, topics...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: list end offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	out := make(map[ledger.TP]int64)
	listed.Each(func(o kadm.ListedOffset) {
		if o.Partition >= 0 && slices.Contains(topics, o.Topic) {
			out[ledger.TP{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	})
	return out, nil
}

// Lag returns, for each partition this consumer owns, how many offsets lie
// between the next one Poll will return and the end offset (EndOffsets).
// Safe from any goroutine.
func (c *Consumer) Lag(ctx context.Context) (map[ledger.TP]int64, error) {
	hw, err := c.EndOffsets(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lag := make(map[ledger.TP]int64, len(c.owned))
	for tp, pos := range c.owned {
		if h, ok := hw[tp]; ok {
			lag[tp] = max(h-pos.next, 0)
		}
	}
	return lag, nil
}

// Owned returns the partitions this consumer currently reads, sorted.
// Safe from any goroutine.
func (c *Consumer) Owned() []ledger.TP {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.SortedFunc(maps.Keys(c.owned), ledger.CompareTP)
}

// Close closes the client; in group mode it first leaves the group, which
// revokes every partition through Handler.Revoked. A Poll in progress returns [ErrClosed]. Call it from
// the poll loop or after the loop has stopped, never from a Handler method.
func (c *Consumer) Close() {
	c.closeOnce.Do(func() {
		c.cl.AllowRebalance() // the leave's revocation waits for it
		c.cl.Close()
	})
}
