// Package procstat reads a process's memory from /proc, for the bench
// tool and the test suites that watch a deltaflow process (the suites
// cannot import the bench tool: it links the daemon they test).
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// RSS reads VmRSS and VmHWM (the peak) of process pid from
// /proc/<pid>/status, in bytes; ok is false once the process is gone.
func RSS(pid int) (rss, hwm int64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	kb := func(rest string) int64 {
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		v, _ := strconv.ParseInt(f[0], 10, 64)
		return v << 10
	}
	for line := range strings.Lines(string(data)) {
		if rest, found := strings.CutPrefix(line, "VmRSS:"); found {
			rss, ok = kb(rest), true
		} else if rest, found := strings.CutPrefix(line, "VmHWM:"); found {
			hwm = kb(rest)
		}
	}
	return rss, hwm, ok
}
