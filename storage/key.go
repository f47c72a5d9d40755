package storage

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidKey is returned (wrapped, naming the key) for a key or list prefix
// that breaks the key rules in the package doc.
var ErrInvalidKey = errors.New("storage: invalid key")

// CheckKey reports whether key is a valid object key: non-empty, relative,
// '/'-separated, with no empty, "." or ".." segment.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("%w %q: must be relative (no leading '/')", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w %q: empty path segment", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w %q: %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

// CheckPrefix reports whether prefix is a valid List prefix: empty, or a valid
// key optionally followed by '/', or a valid "directory/" followed by any
// partial last segment (e.g. "_delta_log/0000").
func CheckPrefix(prefix string) error {
	dir, _ := splitPrefix(prefix)
	if dir == "" {
		if strings.HasPrefix(prefix, "/") {
			return fmt.Errorf("%w: list prefix %q must be relative", ErrInvalidKey, prefix)
		}
		return nil
	}
	if err := CheckKey(strings.TrimSuffix(dir, "/")); err != nil {
		return fmt.Errorf("list prefix: %w", err)
	}
	return nil
}

// splitPrefix splits a list prefix after its last '/': "a/b/c" gives "a/b/"
// and "c". The directory part holds every key the prefix can match.
func splitPrefix(prefix string) (dir, partial string) {
	i := strings.LastIndexByte(prefix, '/')
	return prefix[:i+1], prefix[i+1:]
}
