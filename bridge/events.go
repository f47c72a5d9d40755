package bridge

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nuid"
)

// Kind names an event; it is the last token of the event's subject and the
// suffix of its type.
type Kind string

// The event kinds, one per event type.
const (
	KindCommit     Kind = "commit"
	KindFlush      Kind = "flush"
	KindCheckpoint Kind = "checkpoint"
	KindActor      Kind = "actor"
	KindDLQ        Kind = "dlq"
	KindLag        Kind = "lag"
	KindOptimize   Kind = "optimize"
	KindVacuum     Kind = "vacuum"
	KindStalled    Kind = "stalled"
	KindDataLoss   Kind = "data_loss"
	KindPause      Kind = "pause"
)

// EventTypePrefix starts every event's type; a breaking change to a body
// bumps the version (io.deltaflow.v2.…) instead of changing v1 in place.
const EventTypePrefix = "io.deltaflow.v1."

// Type returns the versioned event type of k, e.g. "io.deltaflow.v1.commit".
func (k Kind) Type() string { return EventTypePrefix + string(k) }

// Header is embedded in every event: JSON bodies start with type, id, time
// and table. Publish fills it in.
type Header struct {
	Type  string    `json:"type" doc:"versioned event type, io.deltaflow.v1.{kind}"`
	ID    string    `json:"id" doc:"unique id of this event (NUID)"`
	Time  time.Time `json:"time" doc:"when the event was published (RFC 3339, UTC)"`
	Table string    `json:"table" doc:"the Delta table"`
}

func (h *Header) header() *Header { return h }

// Event is one of the typed events below, passed by pointer: *CommitEvent,
// *FlushEvent, *CheckpointEvent, *ActorEvent, *DLQEvent, *LagEvent,
// *OptimizeEvent, *VacuumEvent, *StalledEvent, *DataLossEvent, *PauseEvent.
type Event interface {
	Kind() Kind
	header() *Header
}

// CommitEvent is published after a Delta commit of one epoch landed.
type CommitEvent struct {
	Header
	Version    int64           `json:"version" doc:"Delta version written"`
	Epoch      uint64          `json:"epoch" doc:"epoch (micro-batch) id"`
	Files      int             `json:"files" doc:"data files added"`
	Rows       int64           `json:"rows" doc:"rows added"`
	Bytes      int64           `json:"bytes" doc:"bytes of data files added"`
	Topic      string          `json:"topic" doc:"Kafka topic, when the version holds offsets of one"`
	Partitions map[int32]int64 `json:"partitions" doc:"Kafka partition -> last offset committed by this version, of that topic"`
	// Topics is every topic's, for a table that reads several.
	Topics     map[string]map[int32]int64 `json:"topics" doc:"Kafka topic -> partition -> last offset committed by this version (every topic, for a table that reads several)"`
	DurationMS int64                      `json:"duration_ms" doc:"from sealing the epoch to the commit landing"`
}

// FlushEvent tells why an epoch was sealed and what its buffers flushed. It
// is published after the epoch's Delta commit landed (just before its
// CommitEvent), so only for epochs that committed: an epoch dropped, or with
// nothing to commit, has none.
type FlushEvent struct {
	Header
	Epoch      uint64 `json:"epoch" doc:"epoch (micro-batch) id"`
	Reason     string `json:"reason" doc:"why the epoch was sealed: timer (flush interval), max_bytes (flush.max_bytes buffered), memory_budget (memory budget full), request (control service flush), shutdown (final commit on stop), catch_up (run --until-latest read everything) or isolate (a step of the search for a record every epoch fails on)"`
	Files      int    `json:"files" doc:"data files written"`
	Rows       int64  `json:"rows" doc:"rows written"`
	Bytes      int64  `json:"bytes" doc:"bytes written"`
	DurationMS int64  `json:"duration_ms" doc:"from sealing the epoch to the start of its commit: readers sealing, buffers encoding and uploading, the DLQ acknowledging"`
}

// CheckpointEvent is published after a Delta checkpoint was written.
type CheckpointEvent struct {
	Header
	Version int64 `json:"version" doc:"Delta version the checkpoint covers"`
}

// ActorAction is what happened to an actor.
type ActorAction string

// The actor lifecycle actions.
const (
	ActorStarted   ActorAction = "started"
	ActorRestarted ActorAction = "restarted"
	ActorStopped   ActorAction = "stopped"
)

// ActorEvent is published when an actor starts, restarts or stops.
type ActorEvent struct {
	Header
	Actor    string      `json:"actor" doc:"actor name: committer, maintenance, or committer/pipeline for the pipeline"`
	Action   ActorAction `json:"action" doc:"started, restarted or stopped"`
	Reason   string      `json:"reason,omitempty" doc:"why (the error, for restarted)"`
	Restarts int         `json:"restarts" doc:"restarts so far"`
}

// DLQEvent is published for each record stored in the DLQ stream.
type DLQEvent struct {
	Header
	Topic     string `json:"topic" doc:"Kafka topic"`
	Partition int32  `json:"partition" doc:"Kafka partition"`
	Offset    int64  `json:"offset" doc:"Kafka offset"`
	Reason    string `json:"reason" doc:"why the record was rejected"`
	Stream    string `json:"stream" doc:"DLQ stream holding the record"`
	Sequence  uint64 `json:"sequence" doc:"its sequence in that stream"`
}

// LagEvent reports how far the table is behind one of its topics.
type LagEvent struct {
	Header
	Topic      string          `json:"topic" doc:"Kafka topic"`
	Partitions map[int32]int64 `json:"partitions" doc:"Kafka partition -> records in Kafka the table does not hold yet (partitions held for data loss left out)"`
	Total      int64           `json:"total" doc:"sum over partitions"`
	Seconds    float64         `json:"seconds" doc:"seconds since the table's last commit while records wait (0 when none do): how long the oldest of them has waited at most"`
}

// OptimizeEvent is published after an OPTIMIZE (compaction) commit.
type OptimizeEvent struct {
	Header
	Version      int64 `json:"version" doc:"Delta version written"`
	FilesAdded   int   `json:"files_added" doc:"compacted files written"`
	FilesRemoved int   `json:"files_removed" doc:"small files removed from the table"`
	BytesAdded   int64 `json:"bytes_added" doc:"bytes written"`
	BytesRemoved int64 `json:"bytes_removed" doc:"bytes removed from the table"`
	DurationMS   int64 `json:"duration_ms" doc:"time taken"`
}

// VacuumEvent is published after a VACUUM.
type VacuumEvent struct {
	Header
	FilesDeleted int   `json:"files_deleted" doc:"files deleted from storage"`
	BytesDeleted int64 `json:"bytes_deleted" doc:"bytes deleted"`
	DryRun       bool  `json:"dry_run" doc:"true if nothing was deleted"`
	DurationMS   int64 `json:"duration_ms" doc:"time taken"`
}

// StalledEvent is published when the stall watchdog finds records waiting
// in Kafka and no epoch committed for too long (or the pipeline failing
// past its backoff cap), and again when it exits the process over it.
type StalledEvent struct {
	Header
	Reason        string    `json:"reason" doc:"what the watchdog saw"`
	Since         time.Time `json:"since" doc:"when the stall was first seen"`
	LastCommit    time.Time `json:"last_commit" doc:"this process's last commit (its start if none)"`
	Uncommitted   int64     `json:"uncommitted" doc:"records in Kafka the table does not hold; -1 if unknown"`
	Exiting       bool      `json:"exiting" doc:"true when the process is exiting now for its restart policy to start a fresh one"`
	ExitNotBefore time.Time `json:"exit_not_before,omitempty" doc:"earliest exit allowed by the restart backoff (the last exits are kept in the KV bucket)"`
}

// DataLossEvent is published when a partition's offset in the table is no
// longer in its Kafka log: records were deleted before deltaflow read them,
// or the topic was deleted and created again.
type DataLossEvent struct {
	Header
	Topic     string `json:"topic" doc:"Kafka topic"`
	Partition int32  `json:"partition" doc:"Kafka partition"`
	Cause     string `json:"cause" doc:"retention (records deleted by retention or DeleteRecords before they were read) or recreated (the topic's ID changed, or its log ends before the table's offset)"`
	Action    string `json:"action" doc:"held (the partition is not read: kafka.on_data_loss fail) or skipped (reading resumes at resume_at, recorded as a DATA_LOSS commit: kafka.on_data_loss skip)"`
	Next      int64  `json:"next_offset" doc:"the next offset the table says to read"`
	LogStart  int64  `json:"log_start" doc:"the partition's log start offset"`
	LogEnd    int64  `json:"log_end" doc:"the partition's log end offset (high watermark)"`
	Records   int64  `json:"records" doc:"records lost (next_offset up to log_start); -1 when unknown (a recreated topic)"`
	ResumeAt  int64  `json:"resume_at" doc:"where reading resumes when the loss is skipped"`
	TopicID   string `json:"topic_id,omitempty" doc:"the topic's ID now, when it differs from the one the table recorded"`
	StoredID  string `json:"stored_topic_id,omitempty" doc:"the topic ID the table's offsets count in"`
	Message   string `json:"message" doc:"what happened and what to do, as logged"`
}

// PauseAction is what happened to reading: paused or resumed.
type PauseAction string

// The pause actions, and who resumed.
const (
	Paused  PauseAction = "paused"
	Resumed PauseAction = "resumed"

	ByControl  = "control"   // a request to the control service
	ByMaxPause = "max_pause" // the pause lasted control.max_pause
	ByDuration = "duration"  // the pause lasted the duration its request asked
)

// PauseEvent is published when the control service pauses reading Kafka,
// and when reading resumes: by the control service, or by itself once the
// pause has lasted control.max_pause.
type PauseEvent struct {
	Header
	Action   PauseAction `json:"action" doc:"paused or resumed"`
	By       string      `json:"by" doc:"control (a request to the control service), duration (resumed by itself: the pause lasted the duration its request asked) or max_pause (resumed by itself: the pause lasted control.max_pause)"`
	Until    time.Time   `json:"until,omitempty" doc:"when reading resumes by itself (the duration asked, or control.max_pause, after the pause began)"`
	PausedMS int64       `json:"paused_ms,omitempty" doc:"resumed: how long reading was paused"`
}

// Kind implements Event.
func (*CommitEvent) Kind() Kind { return KindCommit }

// Kind implements Event.
func (*FlushEvent) Kind() Kind { return KindFlush }

// Kind implements Event.
func (*CheckpointEvent) Kind() Kind { return KindCheckpoint }

// Kind implements Event.
func (*ActorEvent) Kind() Kind { return KindActor }

// Kind implements Event.
func (*DLQEvent) Kind() Kind { return KindDLQ }

// Kind implements Event.
func (*LagEvent) Kind() Kind { return KindLag }

// Kind implements Event.
func (*OptimizeEvent) Kind() Kind { return KindOptimize }

// Kind implements Event.
func (*VacuumEvent) Kind() Kind { return KindVacuum }

// Kind implements Event.
func (*StalledEvent) Kind() Kind { return KindStalled }

// Kind implements Event.
func (*DataLossEvent) Kind() Kind { return KindDataLoss }

// Kind implements Event.
func (*PauseEvent) Kind() Kind { return KindPause }

// eventCatalogue lists every event, in documentation order, with what
// publishes it.
var eventCatalogue = []struct {
	ev   Event
	when string
}{
	{&CommitEvent{}, "after each Delta commit of an epoch"},
	{&FlushEvent{}, "after an epoch's Delta commit landed, just before its commit event (an epoch dropped, or with nothing to commit, has none)"},
	{&CheckpointEvent{}, "after a Delta checkpoint"},
	{&ActorEvent{}, "when an actor starts, restarts or stops"},
	{&DLQEvent{}, "for each record stored in the DLQ"},
	{&LagEvent{}, "with each stall-watchdog check (every `flush.interval`/4, 1–15 s; none when `watchdog.stall_intervals` is 0), per topic the table reads"},
	{&OptimizeEvent{}, "after an OPTIMIZE commit"},
	{&VacuumEvent{}, "after a VACUUM"},
	{&StalledEvent{}, "when the stall watchdog sees a stall, and when it exits over it"},
	{&DataLossEvent{}, "when a partition's table offset is no longer in its Kafka log, at assignment or when a fetch finds it out of range"},
	{&PauseEvent{}, "when the control service pauses reading Kafka, and when reading resumes (by the control service, or by itself after the duration asked or control.max_pause)"},
}

// Publish sends ev on deltaflow.<table>.events.<kind>, filling its header
// (type, a new id, time if zero, table). It is a core NATS publish:
// fire-and-forget, it never waits for the server, and while disconnected
// nats.go buffers events (up to its reconnect buffer, 8 MB) and sends them on
// reconnect. Events are observations, not part of exactly-once: callers
// should log an error, never retry or fail an epoch on it.
func (b *Bridge) Publish(ev Event) error {
	h := ev.header()
	h.Type = ev.Kind().Type()
	h.ID = nuid.Next()
	if h.Time.IsZero() {
		h.Time = time.Now().UTC()
	}
	h.Table = b.table
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("publish %s event: %w", ev.Kind(), err)
	}
	subj := EventSubject(b.table, ev.Kind())
	if err := b.nc.Publish(subj, body); err != nil {
		return fmt.Errorf("publish %s: %w", subj, err)
	}
	return nil
}
