package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestIsPermanent(t *testing.T) {
	s3 := func(code string, status int) error {
		return s3Error("put", "k", minio.ErrorResponse{Code: code, StatusCode: status, Message: code})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"access denied", s3("AccessDenied", 403), true},
		{"unknown access key", s3("InvalidAccessKeyId", 403), true},
		{"wrong secret", s3("SignatureDoesNotMatch", 403), true},
		{"bucket missing", s3("NoSuchBucket", 404), true},
		{"invalid key", fmt.Errorf("put: %w", ErrInvalidKey), true},
		{"filesystem permission", &fs.PathError{Op: "open", Path: "/t", Err: syscall.EACCES}, true},
		{"slow down", s3("SlowDown", 503), false},
		{"server error", s3("InternalError", 500), false},
		{"server not ready", s3("XMinioServerNotInitialized", 503), false},
		{"object missing", s3("NoSuchKey", 404), false},
		{"key taken", s3("PreconditionFailed", 412), false},
		{"timeout", fmt.Errorf("get k: %w", context.DeadlineExceeded), false},
		{"connection refused", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}, false},
		{"injected", fmt.Errorf("Put k: %w", ErrInjected), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsPermanent(tc.err); got != tc.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// A store whose root the process may not write fails with a permanent error.
func TestIsPermanentLocalPermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes anywhere")
	}
	root := t.TempDir()
	s, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(root, 0o700) })
	err = s.Put(t.Context(), "a/b.json", []byte("x"))
	if err == nil || !IsPermanent(err) {
		t.Errorf("Put into a read-only root: err = %v, IsPermanent = %v", err, IsPermanent(err))
	}
	if errors.Is(err, ErrNotExist) {
		t.Errorf("permission error reported as missing: %v", err)
	}
}
