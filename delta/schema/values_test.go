package schema

import "testing"

// A decimal partition value, in Spark 4's plain form or Spark 3.5's
// scientific one, reads as the plain text of its column's scale.
func TestParseDecimalPartitionValue(t *testing.T) {
	for typ, cases := range map[DecimalType]map[string]string{
		{Precision: 20, Scale: 10}: {"1E-10": "0.0000000001", "0.0000000001": "0.0000000001", "-1.000E-7": "-0.0000001000", "0E-10": "0.0000000000"},
		{Precision: 12, Scale: 2}:  {"12.50": "12.50", "-0.01": "-0.01", "0.00": "0.00"},
		{Precision: 10, Scale: 0}:  {"-7": "-7", "0": "0"},
	} {
		for in, want := range cases {
			if got, err := ParsePartitionValue(typ, &in); err != nil || got != want {
				t.Errorf("%s %q: %v, %v; want %q", typ, in, got, err, want)
			}
		}
	}
	for _, bad := range []string{"1/2", "12,50", "x"} {
		if _, err := ParsePartitionValue(DecimalType{Precision: 12, Scale: 2}, &bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
