package cli

import (
	"flag"
	"os"
	"strings"

	"github.com/deltaflow/deltaflow/bridge/kafka"
	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// targetFlags are the flags of the commands that set where deltaflow
// resumes (takeover, seek): the configuration `run` uses, and flags that
// override its table, txn app id, topic and brokers.
type targetFlags struct {
	tableFlags
	config, app, topic, brokers string
}

func (f *targetFlags) register(fs *flag.FlagSet) {
	f.tableFlags.register(fs, false)
	fs.StringVar(&f.config, "config", "", "deltaflow configuration `FILE` (as for run; environment overrides apply); flags override it")
	fs.StringVar(&f.app, "app", "", "txn appId prefix (default table.app_id: deltaflow)")
	fs.StringVar(&f.topic, "topic", "", "Kafka topic (default kafka.topic, $KAFKA_TOPIC: sensor-events)")
	fs.StringVar(&f.brokers, "brokers", "", "Kafka brokers, comma-separated (default kafka.brokers, $KAFKA_BOOTSTRAP)")
}

// load returns the configuration with the flags applied; a table must come
// from --table, --config or DELTAFLOW_TABLE_URI, never from the default.
func (f *targetFlags) load() (*daemon.Config, storage.Options, error) {
	if f.uri == "" && f.config == "" && os.Getenv("DELTAFLOW_TABLE_URI") == "" {
		return nil, storage.Options{}, usagef("--table (or --config, or DELTAFLOW_TABLE_URI) is required")
	}
	cfg, err := daemon.Load(f.config, os.Getenv)
	if err != nil {
		return nil, storage.Options{}, err
	}
	if f.uri != "" {
		cfg.Table.URI = f.uri
	}
	if f.app != "" {
		cfg.Table.AppID = f.app
	}
	if f.topic != "" {
		cfg.Kafka.Topic = f.topic
	}
	if f.brokers != "" {
		cfg.Kafka.Brokers = strings.Split(f.brokers, ",")
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
	cfg.Storage.SecretKey = kafka.Secret(opts.SecretKey)
	if err := cfg.Validate(); err != nil {
		return nil, storage.Options{}, err
	}
	return cfg, opts, nil
}
