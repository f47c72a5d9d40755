package actors

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestSchedule runs testdata/schedule.txt: each case is a script of the
// committer's events, then "----" and the decisions the schedule makes, as
// the committer acts on them (it seals when told to and a pipeline runs).
func TestSchedule(t *testing.T) {
	data, err := os.ReadFile("testdata/schedule.txt")
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	for _, block := range strings.Split(string(data), "\n\n") {
		var script []string
		for line := range strings.Lines(block) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				script = append(script, line)
			}
		}
		if len(script) == 0 {
			continue
		}
		sep := slices.Index(script, "----")
		if sep < 0 {
			t.Fatalf("case without ----: %q", script)
		}
		cases++
		want := script[sep+1:]
		if got := runSchedule(t, script[:sep]); !slices.Equal(got, want) {
			t.Errorf("%s\n got: %q\nwant: %q", strings.Join(script[:sep], "; "), got, want)
		}
	}
	if cases < 5 {
		t.Fatalf("only %d cases in testdata/schedule.txt", cases)
	}
}

// runSchedule plays events on a new schedule, standing in for the
// committer, and returns the decisions.
func runSchedule(t *testing.T, events []string) []string {
	var s schedule
	var out []string
	running, pipeline, curReason := false, true, ""
	replies := map[string]chan error{}
	var names []string // in the order of their requests
	seal := func(reason string) {
		out = append(out, "seal "+reason)
		s.sealed()
		running, curReason = true, reason
	}
	for _, ev := range events {
		f := strings.Fields(ev)
		switch f[0] {
		case "request":
			var reply chan error
			if len(f) > 2 {
				name := strings.TrimPrefix(f[2], "reply=")
				reply = make(chan error, 1)
				replies[name] = reply
				names = append(names, name)
			}
			if s.request(f[1], reply, running) && pipeline {
				seal(f[1])
			}
		case "finish":
			var err error
			if len(f) > 1 {
				err = errors.New(strings.TrimPrefix(f[1], "err="))
			}
			running = false
			next, reason := s.finished(err)
			var answered []string
			result := "ok"
			for _, n := range names {
				select {
				case e := <-replies[n]:
					answered = append(answered, n)
					if e != nil {
						result = e.Error()
					}
				default:
				}
			}
			if len(answered) > 0 {
				out = append(out, "answer "+strings.Join(answered, ",")+": "+result)
			}
			if next && pipeline {
				seal(reason)
			}
		case "drop":
			s.dropped(curReason)
			running, pipeline = false, false
		case "rebuild":
			pipeline = true
			if ok, reason := s.rebuilt(); ok && !running {
				seal(reason)
			}
		default:
			t.Fatalf("unknown event %q", ev)
		}
	}
	if len(out) == 0 {
		out = []string{"-"}
	}
	return out
}
