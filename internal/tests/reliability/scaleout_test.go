package reliability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/tests/scenario"
)

// TestScaleOut runs three deltaflow processes in one consumer group writing
// one table on MinIO while records stream into a 6-partition topic: they
// start one by one (partitions move at each join), one is SIGKILLed and
// started again (its partitions move when its session expires, and back),
// and `deltaflow optimize` compacts the table meanwhile. The processes'
// commits interleave through optimistic concurrency (put-if-absent on the
// commit file, conflict checks on txn appIds); at the end every record is in
// the table or the DLQ exactly once.
func TestScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers; skipped with -short")
	}
	rate := 600
	if crashLong {
		rate = 3000
	}
	r := newCrashRig(t, "scaleout", 6, nil)
	producer := r.produce(0, rate)
	procs := map[string][]*scenario.Daemon{} // every life of each process, by name
	all := func() []*scenario.Daemon {
		var out []*scenario.Daemon
		for _, lives := range procs {
			out = append(out, lives...)
		}
		return out
	}
	// start runs a process and waits for its first commit: it then owns
	// partitions and commits beside the others.
	start := func(name string) {
		t.Helper()
		began := time.Now()
		d := r.run(name)
		procs[name] = append(procs[name], d)
		if err := scenario.WaitFor(3*time.Minute, func() bool { return len(crashCommits(d)) > 0 || !d.Running() }); err != nil || !d.Running() {
			t.Fatalf("%s: no commit within 3m\n%s", name, crashTails(all()))
		}
		t.Logf("%s (pid %d) started; first commit after %s", name, d.Pid(), crashFirstCommit(d, began))
	}

	start("deltaflow-A")
	stopOptimize := scaleoutOptimizeLoop(t, r)
	start("deltaflow-B")
	start("deltaflow-C")

	victim := procs["deltaflow-B"][0]
	time.Sleep(2 * time.Second)
	victim.Kill()
	killed := time.Now()
	t.Logf("deltaflow-B SIGKILLed after %d commits", len(crashCommits(victim)))
	start("deltaflow-B")
	t.Logf("deltaflow-B back %s after the kill", time.Since(killed).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // all three commit side by side again

	if err := producer.Stop(time.Minute); err != nil {
		t.Fatalf("producer: %v\n%s", err, producer.Tail(2000))
	}
	t.Logf("producer: %s", strings.TrimSpace(producer.Log.String()))
	took := r.waitCaughtUp(5*time.Minute, all()...)
	t.Logf("caught up %s after the producer stopped", took.Round(time.Millisecond))
	optimized := stopOptimize()
	// Revocations before the shutdown (which revokes everything).
	revokedA := strings.Count(procs["deltaflow-A"][0].Log.String(), "kafka: partitions revoked")
	for _, d := range all() {
		if d.Running() {
			if err := d.Stop(30 * time.Second); err != nil {
				t.Errorf("SIGTERM: %v\n%s", err, d.Tail(4000))
			}
		}
	}

	// Who committed what, from the processes' logs; the table's history
	// has the same versions.
	owner := map[int64]string{}
	for name, lives := range procs {
		for i, d := range lives {
			label := fmt.Sprintf("%s#%d", name, i+1)
			revoked := strings.Count(d.Log.String(), "kafka: partitions revoked")
			conflicts := strings.Count(d.Log.String(), "dropped: ")
			commits := crashCommits(d)
			t.Logf("%-14s %3d commits, %2d revocations, %2d epochs dropped on a conflict", label, len(commits), revoked, conflicts)
			for _, v := range commits {
				if prev, dup := owner[v]; dup {
					t.Errorf("version %d committed by both %s and %s", v, prev, label)
				}
				owner[v] = label
			}
		}
	}
	hist, err := delta.NewTable(r.store).History(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, h := range hist {
		ops[h.Operation]++
		if h.Operation == "STREAMING UPDATE" && owner[h.Version] == "" {
			t.Errorf("version %d is a streaming commit no process logged", h.Version)
		}
	}
	t.Logf("table history: %v; optimize runs that committed: %d", ops, optimized)
	writers, switches := scaleoutInterleaving(owner)
	t.Logf("%d processes committed; the committer changed %d times along the log", writers, switches)
	if writers < 3 || switches < 3 {
		t.Errorf("commits from %d processes with %d switches: the processes did not write side by side", writers, switches)
	}
	if ops["OPTIMIZE"] == 0 || optimized == 0 {
		t.Errorf("no OPTIMIZE committed while the processes wrote (history %v)", ops)
	}
	if revokedA == 0 {
		t.Errorf("deltaflow-A never gave up a partition before the shutdown: nothing moved")
	}
	r.account()
	r.verify()
}

// scaleoutInterleaving counts the distinct committers and how often the
// committer changes from one version to the next.
func scaleoutInterleaving(owner map[int64]string) (writers, switches int) {
	versions := make([]int64, 0, len(owner))
	seen := map[string]bool{}
	for v, who := range owner {
		versions = append(versions, v)
		seen[strings.SplitN(who, "#", 2)[0]] = true
	}
	slices.Sort(versions)
	for i := 1; i < len(versions); i++ {
		if owner[versions[i]] != owner[versions[i-1]] {
			switches++
		}
	}
	return len(seen), switches
}

// scaleoutOptimizeLoop runs `deltaflow optimize` on the table again and
// again, concurrently with the writers, until the returned func is called;
// that returns how many runs committed a compaction. A failed run fails the
// test: OPTIMIZE must coexist with streaming appends.
func scaleoutOptimizeLoop(t *testing.T, r *crashRig) func() int {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0
	wg.Go(func() {
		for n := 1; ctx.Err() == nil; n++ {
			d := scenario.Start(t, fmt.Sprintf("optimize#%d", n), r.bin, r.env(), "optimize", "--table", r.uri, "--target-size", "1MiB")
			if err := scenario.WaitFor(3*time.Minute, func() bool { return !d.Running() }); err != nil {
				t.Errorf("optimize #%d still running after 3m\n%s", n, d.Tail(4000))
				d.Kill()
				return
			}
			out := strings.TrimSpace(d.Log.String())
			if err, _ := d.Exited(); err != nil {
				t.Errorf("optimize #%d: %v\n%s", n, err, out)
				return
			}
			if i := strings.LastIndex(out, "optimized:"); i >= 0 {
				mu.Lock()
				committed++
				mu.Unlock()
				t.Logf("optimize #%d: %s", n, out[i:])
			}
			select {
			case <-ctx.Done():
			case <-time.After(4 * time.Second):
			}
		}
	})
	stop := func() int {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return committed
	}
	t.Cleanup(func() { stop() }) // a failed test must not leave the loop logging
	return stop
}
