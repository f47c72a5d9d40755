package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/deltaflow/deltaflow/delta"
	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// Environment variables of the table flags.
const (
	tableEnv  = "DELTAFLOW_TABLE_URI"
	configEnv = "DELTAFLOW_CONFIG"
)

// tableFlags are the flags every table command takes: the table URI, the
// configuration file it may come from instead, and the S3 settings (which
// default to MINIO_* / AWS_* environment variables). A flag wins over its
// environment variable, which wins over the configuration file.
type tableFlags struct {
	uri, config  string
	version      int64
	s3           storage.Options
	singleWriter bool
}

func (f *tableFlags) register(fs *pflag.FlagSet) {
	f.version = -1 // latest, also for commands without --version
	fs.StringVar(&f.uri, "table", "", "table `URI`: s3://bucket/prefix, file:///path or a path; required unless --config gives table.uri. With a --config of several tables (tables:), the table's NAME")
	bindEnv(fs, "table", tableEnv)
	configFlag(fs, &f.config, "deltaflow configuration `FILE` (as for run) for the table URI and storage settings; flags override it")
	registerS3(fs, &f.s3)
}

// configFlag adds --config, bound to $DELTAFLOW_CONFIG.
func configFlag(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "config", "", usage)
	bindEnv(fs, "config", configEnv)
}

// registerS3 adds the S3 flags; empty ones fall back to the environment
// in storage.Open.
func registerS3(fs *pflag.FlagSet, o *storage.Options) {
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", "S3/MinIO endpoint `HOST:PORT` or URL [$MINIO_ENDPOINT, $AWS_ENDPOINT_URL]")
	fs.StringVar(&o.AccessKey, "s3-access-key", "", "S3 access `KEY` [$MINIO_ACCESS_KEY, $AWS_ACCESS_KEY_ID]")
	secretFileFlag(fs, &o.SecretKey, "s3-secret-key-file", "`FILE` holding the S3 secret key; without it the key comes from $MINIO_SECRET_KEY or $AWS_SECRET_ACCESS_KEY")
	fs.StringVar(&o.Region, "s3-region", "", "S3 `REGION` [$AWS_REGION]")
	fs.StringVar(&o.CAFile, "s3-ca-file", "", "PEM CA bundle `FILE` to trust for an https:// endpoint [$MINIO_CA_FILE]")
}

// registerVersion adds --version, the table version to read.
func (f *tableFlags) registerVersion(fs *pflag.FlagSet) {
	atLeast(fs, &f.version, "version", -1, 0, "read the table as of version `N`")
	fs.Lookup("version").DefValue = "latest"
}

// registerWriter adds the flags of commands that write the table.
func (f *tableFlags) registerWriter(fs *pflag.FlagSet) {
	// Not bound with bindEnv: a dry run writes nothing, so it must not fail
	// on a bad $DELTAFLOW_SINGLE_WRITER; writable reads it.
	fs.BoolVar(&f.singleWriter, "single-writer", false, "write even if the store does not honour put-if-absent; only safe when nothing else writes the table [$"+daemon.SingleWriterEnv+"]")
}

// load returns the configuration of --config (defaults and environment
// overrides without it) with the table flags applied over it. A table must
// come from --table, $DELTAFLOW_TABLE_URI or --config, never from the
// default. A configuration of several tables is seen as the single form
// of the one --table names.
func (f *tableFlags) load() (*daemon.Config, error) {
	if f.uri == "" && f.config == "" {
		return nil, usagef("--table is required (or $%s, or --config with table.uri)", tableEnv)
	}
	cfg, err := daemon.Load(f.config, os.Getenv)
	if err != nil {
		return nil, err
	}
	if routes := cfg.Routes(); len(routes) > 1 {
		if f.uri == "" {
			_, err := cfg.Route("")
			return nil, usagef("--table NAME is required: %s holds several tables: %v", f.config, err)
		}
		r, err := cfg.Route(f.uri)
		if err != nil {
			return nil, usagef("--table: %v", err)
		}
		cfg = cfg.TableView(r)
	} else if f.uri != "" {
		cfg.Table.URI = f.uri
	}
	opts := cfg.StorageOptions()
	for _, o := range []struct{ flag, cfg *string }{
		{&f.s3.Endpoint, &opts.Endpoint}, {&f.s3.AccessKey, &opts.AccessKey}, {&f.s3.SecretKey, &opts.SecretKey},
		{&f.s3.Region, &opts.Region}, {&f.s3.CAFile, &opts.CAFile},
	} {
		if *o.flag != "" {
			*o.cfg = *o.flag
		}
	}
	cfg.Storage.Endpoint, cfg.Storage.AccessKey, cfg.Storage.Region, cfg.Storage.CAFile = opts.Endpoint, opts.AccessKey, opts.Region, opts.CAFile
	cfg.Storage.SecretKey = secret.Secret(opts.SecretKey)
	cfg.Storage.SingleWriter = cfg.Storage.SingleWriter || f.singleWriter
	return cfg, nil
}

// resolve takes the table URI and storage settings from --config when it
// is given; without it the flags (and storage.Open's environment defaults)
// are all there is.
func (f *tableFlags) resolve() error {
	if f.uri != "" && f.config == "" {
		return nil
	}
	cfg, err := f.load()
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	f.uri, f.s3, f.singleWriter = cfg.Table.URI, cfg.StorageOptions(), cfg.Storage.SingleWriter
	return nil
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
	if err := f.resolve(); err != nil {
		return nil, err
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
	if errors.Is(err, delta.ErrTableNotFound) {
		err = fmt.Errorf("%w: %s", err, whyNotFound(tbl.Store()))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read table %s: %w", f.uri, err)
	}
	return tbl, s, nil
}

// whyNotFound says why a store holds no Delta log: the path is the log
// directory itself, does not exist, or is not a Delta table.
func whyNotFound(store storage.Store) string {
	logDir := strings.TrimSuffix(delta.LogDir, "/")
	uri := strings.TrimSuffix(store.URI(), "/")
	if parent, ok := strings.CutSuffix(uri, "/"+logDir); ok {
		return fmt.Sprintf("this is the table's %s directory; give the table's root, %s", logDir, parent)
	}
	local, ok := store.(*storage.Local)
	if !ok {
		return fmt.Sprintf("no %s under %s (a missing prefix, or not a Delta table)", logDir, uri)
	}
	if _, err := os.Stat(local.Root()); errors.Is(err, fs.ErrNotExist) {
		return "no such directory: " + local.Root()
	}
	return fmt.Sprintf("%s is not a Delta table: it has no %s directory", local.Root(), logDir)
}

// formatTime is how text output shows a time; JSON has time.Time (RFC 3339).
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }
