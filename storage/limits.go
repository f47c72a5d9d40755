package storage

import (
	"errors"
	"syscall"

	"github.com/minio/minio-go/v7"
)

// KeyLimits are the longest key, and the longest '/'-separated segment of
// one, that a store takes, in bytes, for keys relative to its root (the
// root's own path or prefix already counted).
type KeyLimits struct {
	Key     int
	Segment int
}

// PortableLimits are the limits of keys every store deltaflow writes takes:
// S3 and MinIO keys are at most 1024 bytes, and MinIO, like a local
// filesystem (NAME_MAX), takes segments of at most 255 bytes. Tables move
// between stores (a local table copied to MinIO, a MinIO bucket backed up
// to disk), so every store is held to them.
var PortableLimits = KeyLimits{Key: 1024, Segment: 255}

// keyLimiter is a Store whose root takes part of PortableLimits.Key.
type keyLimiter interface{ KeyLimits() KeyLimits }

// Limits returns the limits of keys relative to s's root: PortableLimits
// less what the root's path (Local) or prefix (S3) takes.
func Limits(s Store) KeyLimits {
	if l, ok := s.(keyLimiter); ok {
		return l.KeyLimits()
	}
	return PortableLimits
}

// pathMax is Linux's PATH_MAX less its terminating NUL.
const pathMax = 4095

// KeyLimits implements keyLimiter: a key is a file under the root.
func (l *Local) KeyLimits() KeyLimits {
	return KeyLimits{Key: min(PortableLimits.Key, pathMax-len(l.root)-1), Segment: PortableLimits.Segment}
}

// KeyLimits implements keyLimiter: a key is an object under the prefix.
func (s *S3) KeyLimits() KeyLimits {
	return KeyLimits{Key: PortableLimits.Key - len(s.prefix), Segment: PortableLimits.Segment}
}

// KeyLimits implements keyLimiter: those of the wrapped store.
func (f *Faulty) KeyLimits() KeyLimits { return Limits(f.Store) }

// rejectedKeyCodes are the S3 error codes of a key the server refuses
// whatever the moment: too long, or a name MinIO cannot store.
var rejectedKeyCodes = map[string]bool{
	"KeyTooLongError":         true,
	"XMinioInvalidObjectName": true,
}

// IsKeyRejected reports whether err says the store refuses the key itself:
// a key breaking the key rules (ErrInvalidKey), a name the filesystem finds
// too long (ENAMETOOLONG), or an S3 answer that the key is too long or not
// a valid object name. No retry cures it, and it follows the key, so the
// data that named the key is at fault, not the store.
func IsKeyRejected(err error) bool {
	if errors.Is(err, ErrInvalidKey) || errors.Is(err, syscall.ENAMETOOLONG) {
		return true
	}
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && rejectedKeyCodes[resp.Code]
}
