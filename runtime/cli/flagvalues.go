package cli

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// number is what a bounded flag holds.
type number interface {
	int | int64 | float64 | time.Duration
}

// bounded is a numeric flag value that refuses values below min (or above
// max, when set) as it is parsed, so `--limit -3` is a usage error (exit 2)
// naming the flag rather than a command that silently does something else.
type bounded[T number] struct {
	p   *T
	min T
	max *T // nil: no upper bound
}

// atLeast adds a numeric flag to fs that must be >= min.
func atLeast[T number](fs *pflag.FlagSet, p *T, name string, value, min T, usage string) {
	*p = value
	fs.Var(&bounded[T]{p: p, min: min}, name, usage)
}

// within adds a numeric flag to fs that must lie in [min, max].
func within[T number](fs *pflag.FlagSet, p *T, name string, value, min, max T, usage string) {
	*p = value
	fs.Var(&bounded[T]{p: p, min: min, max: &max}, name, usage)
}

func (b *bounded[T]) Set(s string) error {
	v, err := parse[T](s)
	if err != nil {
		return err
	}
	switch {
	case b.max != nil && (v < b.min || v > *b.max):
		return fmt.Errorf("must be between %v and %v", b.min, *b.max)
	case v < b.min:
		return fmt.Errorf("must be >= %v", b.min)
	}
	*b.p = v
	return nil
}

// parse parses s as a T.
func parse[T number](s string) (T, error) {
	var v T
	var err error
	switch p := any(&v).(type) {
	case *int:
		*p, err = strconv.Atoi(s)
	case *int64:
		*p, err = strconv.ParseInt(s, 10, 64)
	case *float64:
		*p, err = strconv.ParseFloat(s, 64)
	case *time.Duration:
		if *p, err = time.ParseDuration(s); err != nil {
			return v, errors.New("not a duration (e.g. 30s, 720h)")
		}
	}
	if err != nil {
		if _, isFloat := any(v).(float64); isFloat {
			return v, errors.New("not a number")
		}
		return v, errors.New("not an integer")
	}
	return v, nil
}

func (b *bounded[T]) String() string {
	if b.p == nil {
		return ""
	}
	return fmt.Sprint(*b.p)
}

// Type is pflag's name of T, so --help shows these flags as it shows
// pflag's own.
func (b *bounded[T]) Type() string {
	switch any(*new(T)).(type) {
	case int:
		return "int"
	case int64:
		return "int64"
	case float64:
		return "float64"
	default:
		return "duration"
	}
}
