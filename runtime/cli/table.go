package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// tableFlags are the flags every table command takes: the table URI and the
// S3 settings (which default to MINIO_* / AWS_* environment variables).
type tableFlags struct {
	uri          string
	version      int64
	s3           storage.Options
	singleWriter bool
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

// registerWriter adds the flags of commands that write the table.
func (f *tableFlags) registerWriter(fs *flag.FlagSet) {
	fs.BoolVar(&f.singleWriter, "single-writer", false, "write even if the store does not honour put-if-absent; only safe when nothing else writes the table (default $"+daemon.SingleWriterEnv+")")
}

// writable opens the latest table for writing: a store whose put-if-absent
// is not atomic is refused unless --single-writer (or $DELTAFLOW_SINGLE_WRITER)
// says this is the only writer. A dry run writes nothing, so its store is
// not probed.
func (f *tableFlags) writable(ctx context.Context, stderr io.Writer, dryRun bool) (*delta.Table, *delta.Snapshot, error) {
	tbl, s, err := f.snapshot(ctx)
	if err != nil || dryRun {
		return tbl, s, err
	}
	single := f.singleWriter
	if v := os.Getenv(daemon.SingleWriterEnv); v != "" && !single {
		if single, err = strconv.ParseBool(v); err != nil {
			return nil, nil, usagef("$%s: %v", daemon.SingleWriterEnv, err)
		}
	}
	if err := daemon.CheckAtomicCommits(ctx, tbl.Store(), single, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		return nil, nil, err
	}
	return tbl, s, nil
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
