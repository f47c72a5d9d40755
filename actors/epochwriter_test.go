package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/ledger"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/messages"
	"github.com/deltaflow/deltaflow/storage"
)

// testRetry retries quickly, and long enough that only a permanent error
// or success ends a test's retries (and short enough that a permanent error
// retried by mistake fails the test soon).
var testRetry = retryPolicy{backoff: Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond}, maxElapsed: 2 * time.Second}

// dlqOutbox is an Outbox whose DLQ answers with errs in turn (then
// acknowledges, or keeps failing with the last one if forever).
type dlqOutbox struct {
	errs    []error
	forever bool
	calls   int
	got     []messages.DeadLetter // the letters of the last call
}

func (o *dlqOutbox) PublishDLQ(_ context.Context, letters []messages.DeadLetter) error {
	o.calls++
	o.got = letters
	switch {
	case o.calls <= len(o.errs):
		return o.errs[o.calls-1]
	case o.forever:
		return o.errs[len(o.errs)-1]
	}
	return nil
}

func (o *dlqOutbox) Publish(bridge.Event)                     {}
func (o *dlqOutbox) MirrorOffset(string, int32, int64, int64) {}

func TestPublishDeadLetters(t *testing.T) {
	letters := []messages.DeadLetter{{Topic: topic, Partition: 1, Offset: 7, Value: []byte("{"), Reason: "not JSON"}}
	unreachable := errors.New("dlq unreachable")
	for _, tc := range []struct {
		name      string
		outbox    *dlqOutbox
		policy    retryPolicy
		calls     int   // want; 0: more than one
		want      error // errors.Is the result; nil: acknowledged
		permanent bool
	}{
		{"acknowledged", &dlqOutbox{}, testRetry, 1, nil, false},
		{"NATS restarting, then acknowledged", &dlqOutbox{errs: []error{
			fmt.Errorf("%w: %w", bridge.ErrDLQIncomplete, nats.ErrTimeout),
			fmt.Errorf("%w: %w", bridge.ErrDLQIncomplete, jetstream.ErrAsyncPublishTimeout),
		}}, testRetry, 3, nil, false},
		{"unknown error retried until maxElapsed", &dlqOutbox{errs: []error{unreachable}, forever: true},
			retryPolicy{backoff: testRetry.backoff, maxElapsed: 20 * time.Millisecond}, 0, unreachable, false},
		{"not authorized: at once", &dlqOutbox{errs: []error{nats.ErrAuthorization}, forever: true}, testRetry, 1, nats.ErrAuthorization, true},
		{"closed bridge: at once", &dlqOutbox{errs: []error{fmt.Errorf("%w: %w", bridge.ErrDLQIncomplete, nats.ErrConnectionClosed)}, forever: true},
			testRetry, 1, nats.ErrConnectionClosed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := epochWriter{outbox: tc.outbox, retry: tc.policy}
			retries := 0
			err := w.publishDeadLetters(t.Context(), letters, func(int, error) { retries++ })
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("publishDeadLetters = %v, want nil", err)
			case tc.want != nil && (!errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), "DLQ not acknowledged: ")):
				t.Fatalf("publishDeadLetters = %v, want DLQ not acknowledged: %v", err, tc.want)
			}
			if got := errors.Is(err, errPermanent); got != tc.permanent {
				t.Errorf("publishDeadLetters = %v: permanent %v, want %v", err, got, tc.permanent)
			}
			if (tc.calls > 0 && tc.outbox.calls != tc.calls) || (tc.calls == 0 && tc.outbox.calls < 2) {
				t.Errorf("PublishDLQ called %d times, want %d (0: several)", tc.outbox.calls, tc.calls)
			}
			if retries != tc.outbox.calls-1 {
				t.Errorf("%d retries reported for %d calls", retries, tc.outbox.calls)
			}
			if !slices.EqualFunc(tc.outbox.got, letters, func(a, b messages.DeadLetter) bool { return a.Offset == b.Offset }) {
				t.Errorf("published %v, want %v", tc.outbox.got, letters)
			}
		})
	}
}

// newTestTable creates an unpartitioned table of the default mapping on
// store and returns it with its snapshot.
func newTestTable(t *testing.T, store storage.Store) (*delta.Table, *delta.Snapshot) {
	t.Helper()
	m, err := mapping.New(mapping.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.NewTable(store)
	snap, err := tbl.Create(t.Context(), m.Schema(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, snap
}

func TestEpochWriterCommit(t *testing.T) {
	app := "deltaflow"
	p0 := ledger.AppID(app, topic, 0)
	firstCommit := delta.CommitKey(1)
	denied := minio.ErrorResponse{Code: "AccessDenied", Message: "Access Denied.", StatusCode: 403}
	for _, tc := range []struct {
		name   string
		faults []storage.Rule
		policy retryPolicy
		// before runs after our snapshot was read: another writer.
		before    func(t *testing.T, tbl *delta.Table)
		version   int64 // want, when committed
		conflict  delta.ConflictKind
		want      error // errors.Is res.err
		permanent bool
		retried   bool
	}{
		{name: "committed", policy: testRetry, version: 1},
		{name: "outcome unknown, retried", policy: testRetry, version: 1, retried: true,
			// The put fails and so does reading it back: the next attempt settles it.
			faults: []storage.Rule{{Prefix: firstCommit, Times: 2}}},
		{name: "store down past maxElapsed", want: storage.ErrInjected, retried: true,
			policy: retryPolicy{backoff: testRetry.backoff, maxElapsed: 20 * time.Millisecond},
			faults: []storage.Rule{{Prefix: "_delta_log/"}}},
		{name: "access denied: at once", policy: testRetry, want: denied, permanent: true,
			faults: []storage.Rule{{Prefix: "_delta_log/", Err: denied}}},
		{name: "another writer took our partition", policy: testRetry, conflict: delta.ConflictTxn,
			before: func(t *testing.T, tbl *delta.Table) {
				other, err := tbl.Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tbl.Commit(t.Context(), other, []delta.Action{{Txn: &delta.Txn{AppID: p0, Version: 3}}},
					delta.Operation{Name: "STREAMING UPDATE"}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "another writer's blind append is reconciled", policy: testRetry, version: 2,
			before: func(t *testing.T, tbl *delta.Table) {
				other, err := tbl.Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				add := &delta.Add{Path: "other.parquet", Size: 1, ModificationTime: 1, DataChange: true}
				if _, err := tbl.Commit(t.Context(), other, []delta.Action{{Add: add}}, delta.Operation{Name: "WRITE"}); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faulty := storage.NewFaulty(storage.NewMem())
			tbl, snap := newTestTable(t, faulty)
			if tc.before != nil {
				tc.before(t, tbl)
			}
			for _, r := range tc.faults {
				faulty.Fail(r)
			}
			es := newEpochState(4, tps(0), messages.ReasonTimer, time.Now())
			es.onSealed(&messages.Sealed{Topic: topic, Epoch: 4, Partition: 0, LastOffset: 9})
			ec := newEpochCommit(es, app, nil, nil, time.Now())
			retries := 0
			res := epochWriter{table: tbl, retry: tc.policy}.commit(t.Context(), snap, ec, func(int, error) { retries++ })

			switch {
			case tc.conflict != 0:
				if res.conflict == nil || res.conflict.Kind != tc.conflict || res.err != nil {
					t.Fatalf("commit = %+v, want conflict kind %d", res, tc.conflict)
				}
			case tc.want != nil:
				if !errors.Is(res.err, tc.want) || res.conflict != nil {
					t.Fatalf("commit = %+v, want error %v", res, tc.want)
				}
				if got := errors.Is(res.err, errPermanent); got != tc.permanent {
					t.Errorf("commit error %v: permanent %v, want %v", res.err, got, tc.permanent)
				}
			default:
				if res.err != nil || res.conflict != nil || res.version != tc.version {
					t.Fatalf("commit = %+v, want version %d", res, tc.version)
				}
				faulty.Reset()
				stored, err := tbl.Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if v, ok := stored.TxnVersion(p0); !ok || v != 9 || stored.Version() != tc.version {
					t.Errorf("log at version %d holds txn %d (%v), want version %d with txn 9", stored.Version(), v, ok, tc.version)
				}
			}
			if got := retries > 0; got != tc.retried {
				t.Errorf("%d retries, want retried %v", retries, tc.retried)
			}
		})
	}
}

func TestNewEpochCommit(t *testing.T) {
	now := time.UnixMilli(1_750_000_000_000)
	es := newEpochState(12, tps(0, 1), messages.ReasonTimer, now)
	es.onSealed(&messages.Sealed{Topic: topic, Epoch: 12, Partition: 1, LastOffset: 41})
	es.onSealed(&messages.Sealed{Topic: topic, Epoch: 12, Partition: 0, LastOffset: -1})
	es.expectFlushes([]string{"buffer-1"})
	es.onFlushed(&messages.Flushed{Epoch: 12, Buffer: "buffer-1", Files: []messages.DataFile{
		{Path: "a.parquet", Size: 100, Rows: 3}, {Path: "b.parquet", Size: 50, Rows: 2},
	}})
	old := int64(1)
	refresh := []delta.Txn{{AppID: ledger.AppID("app", topic, 0), Version: 7, LastUpdated: &old}}

	ec := newEpochCommit(es, "app", nil, refresh, now)

	var got []string
	for _, a := range ec.actions {
		switch {
		case a.Add != nil:
			got = append(got, "add "+a.Add.Path)
		case a.Txn != nil:
			got = append(got, fmt.Sprintf("txn %s %d @%d", a.Txn.AppID, a.Txn.Version, *a.Txn.LastUpdated))
		}
	}
	want := []string{"add a.parquet", "add b.parquet",
		fmt.Sprintf("txn %s 41 @%d", ledger.AppID("app", topic, 1), now.UnixMilli()),
		fmt.Sprintf("txn %s 7 @1", ledger.AppID("app", topic, 0))} // refreshed as given, after the epoch's own
	if !slices.Equal(got, want) {
		t.Errorf("actions = %q, want %q", got, want)
	}
	if ec.rows != 5 || ec.bytes != 150 {
		t.Errorf("rows, bytes = %d, %d; want 5, 150", ec.rows, ec.bytes)
	}
	if ec.op.Name != "STREAMING UPDATE" || ec.op.Parameters["epochId"] != "12" || ec.op.Parameters["queryId"] != "app" ||
		ec.op.Metrics["numAddedFiles"] != "2" || ec.op.Metrics["numOutputRows"] != "5" || ec.op.Metrics["numOutputBytes"] != "150" {
		t.Errorf("operation = %+v", ec.op)
	}
}
