package cli

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/deltaflow/deltaflow/runtime/daemon"
	"github.com/deltaflow/deltaflow/storage"
)

// targetFlags are the flags of the commands that set where deltaflow
// resumes (takeover, seek): the configuration `run` uses, and flags that
// override its table, txn app id, topic and brokers.
type targetFlags struct {
	tableFlags
	app, topic, brokers string
}

func (f *targetFlags) register(fs *pflag.FlagSet) {
	f.tableFlags.register(fs)
	fs.StringVar(&f.app, "app", "", "txn appId `PREFIX` (default table.app_id: deltaflow)")
	fs.StringVar(&f.topic, "topic", "", "Kafka `topic` (default kafka.topic, $KAFKA_TOPIC: sensor-events)")
	fs.StringVar(&f.brokers, "brokers", "", "Kafka `brokers`, comma-separated (default kafka.brokers, $KAFKA_BOOTSTRAP)")
}

// load returns the configuration with the flags applied.
func (f *targetFlags) load() (*daemon.Config, storage.Options, error) {
	cfg, err := f.tableFlags.load()
	if err != nil {
		return nil, storage.Options{}, err
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
	if err := cfg.Validate(); err != nil {
		return nil, storage.Options{}, err
	}
	return cfg, cfg.StorageOptions(), nil
}
