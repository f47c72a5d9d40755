package parquetfile

import (
	"math/big"
	"testing"
)

func TestFormatDecimal(t *testing.T) {
	for _, c := range []struct {
		unscaled            int64
		fileScale, outScale int
		want                string
	}{
		{1230, 2, 2, "12.30"}, {-5, 2, 2, "-0.05"}, {123, 1, 2, "12.30"}, {7, 0, 0, "7"}, {-1234, 3, 1, "-1.2"},
	} {
		if got := formatDecimal(big.NewInt(c.unscaled), c.fileScale, c.outScale); got != c.want {
			t.Errorf("formatDecimal(%d,%d,%d) = %s, want %s", c.unscaled, c.fileScale, c.outScale, got, c.want)
		}
	}
	if got := bigFromTwosComplement([]byte{0xff, 0x85}).Int64(); got != -123 {
		t.Errorf("two's complement: %d", got)
	}
}
