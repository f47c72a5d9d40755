package storage

import (
	"errors"
	"io/fs"

	"github.com/minio/minio-go/v7"
)

// permanentS3Codes are the S3 error codes no retry can cure: the
// credentials are wrong or lack a permission, or the bucket is not there.
var permanentS3Codes = map[string]bool{
	"AccessDenied":          true,
	"AllAccessDisabled":     true,
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"NoSuchBucket":          true,
	"InvalidBucketName":     true,
}

// IsPermanent reports whether a store error needs a human rather than a
// retry: a key the store refuses (IsKeyRejected), a permission the local
// filesystem refuses, or an S3 answer that the credentials or the bucket
// are wrong. Anything else
// (timeouts, refused connections, 5xx, SlowDown) may pass by itself.
// ErrNotExist and ErrExist are answers, not failures: callers decide.
func IsPermanent(err error) bool {
	if IsKeyRejected(err) || errors.Is(err, fs.ErrPermission) {
		return true
	}
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && permanentS3Codes[resp.Code]
}
