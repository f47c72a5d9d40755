package dlqreplay

import (
	"fmt"
	"strconv"
	"strings"
)

// formatRanges writes ascending sequences compactly, as "1-5,7,9-12": a
// replay commit lists thousands of mostly consecutive sequences.
func formatRanges(seqs []uint64) string {
	var b strings.Builder
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(seqs[i], 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(seqs[j], 10))
		}
		i = j + 1
	}
	return b.String()
}

// parseRanges reads what formatRanges wrote.
func parseRanges(s string) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		last := first
		if isRange {
			if last, err = strconv.ParseUint(hi, 10, 64); err != nil || last < first {
				return nil, fmt.Errorf("%q is not a range of sequences", part)
			}
		}
		for seq := first; seq <= last; seq++ {
			out[seq] = true
		}
	}
	return out, nil
}
