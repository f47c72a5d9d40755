package cli

import (
	"io"
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
	asJSON              bool
}

func (f *targetFlags) register(fs *pflag.FlagSet) {
	f.tableFlags.register(fs)
	fs.StringVar(&f.app, "app", "", "txn appId `PREFIX` (default table.app_id: deltaflow)")
	fs.StringVar(&f.topic, "topic", "", "Kafka `topic` (default kafka.topic: sensor-events) [$KAFKA_TOPIC]")
	fs.StringVar(&f.brokers, "brokers", "", "Kafka `brokers`, comma-separated (default kafka.brokers) [$KAFKA_BOOTSTRAP]")
	jsonFlag(fs, &f.asJSON)
}

// textOut is where the command's text goes: nowhere with --json, whose
// result writeJSON prints at the end.
func (f *targetFlags) textOut(out IO) io.Writer {
	if f.asJSON {
		return io.Discard
	}
	return out.Stdout
}

// writeJSON prints the plan with --json; version is the commit, nil on a
// dry run.
func (f *targetFlags) writeJSON(out IO, plan *startTable, cfg *daemon.Config, version *int64) error {
	if !f.asJSON {
		return nil
	}
	return plan.writeJSON(out.Stdout, cfg, version)
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
