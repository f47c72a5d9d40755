package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/storage"
)

// tableFlags are the flags every table command takes: the table URI and the
// S3 settings (which default to MINIO_* / AWS_* environment variables).
type tableFlags struct {
	uri     string
	version int64
	s3      storage.Options
}

func (f *tableFlags) register(fs *flag.FlagSet, withVersion bool) {
	f.version = -1 // latest, also for commands without --version
	fs.StringVar(&f.uri, "table", "", "table `URI`: s3://bucket/prefix, file:///path or a path (required)")
	fs.StringVar(&f.s3.Endpoint, "s3-endpoint", "", "S3/MinIO endpoint host:port or URL (default $MINIO_ENDPOINT, $AWS_ENDPOINT_URL)")
	fs.StringVar(&f.s3.AccessKey, "s3-access-key", "", "S3 access key (default $MINIO_ACCESS_KEY, $AWS_ACCESS_KEY_ID)")
	fs.StringVar(&f.s3.SecretKey, "s3-secret-key", "", "S3 secret key (default $MINIO_SECRET_KEY, $AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&f.s3.Region, "s3-region", "", "S3 region (default $AWS_REGION)")
	fs.StringVar(&f.s3.CAFile, "s3-ca-file", "", "PEM CA bundle to trust for an https:// endpoint (default $MINIO_CA_FILE)")
	if withVersion {
		fs.Int64Var(&f.version, "version", -1, "read the table as of this `version` (default: latest)")
	}
}

// open opens the table store.
func (f *tableFlags) open(ctx context.Context) (*delta.Table, error) {
	if f.uri == "" {
		return nil, usagef("--table is required")
	}
	store, err := storage.Open(ctx, f.uri, f.s3)
	if err != nil {
		return nil, err
	}
	return delta.NewTable(store), nil
}

// snapshot opens the table at --version, or the latest.
func (f *tableFlags) snapshot(ctx context.Context) (*delta.Table, *delta.Snapshot, error) {
	tbl, err := f.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	var s *delta.Snapshot
	if f.version >= 0 {
		s, err = tbl.SnapshotAt(ctx, f.version)
	} else {
		s, err = tbl.Snapshot(ctx)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read table %s: %w", f.uri, err)
	}
	return tbl, s, nil
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }
