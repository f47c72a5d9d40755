package cli

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// progress prints the demo's progress: one line rewritten in place on a
// terminal, a plain line every few seconds otherwise (logs, CI).
type progress struct {
	w        io.Writer
	tty      bool
	interval time.Duration
	produced atomic.Int64
	last     time.Time
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, interval: 5 * time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.interval = true, 250*time.Millisecond
		}
	}
	return p
}

func (p *progress) show(rows, version int64) {
	line := fmt.Sprintf("produced %d events, committed %d rows, table version %d", p.produced.Load(), rows, version)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	if time.Since(p.last) >= p.interval {
		p.last = time.Now()
		fmt.Fprintln(p.w, line)
	}
}

// done ends the live line.
func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
