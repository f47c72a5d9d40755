package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// Exit codes of `config check`, as `promtool check config` and
// `nats-server -t` have them.
const (
	exitProbeFailed   = 1
	exitInvalidConfig = 2
)

// configCommand groups the commands about deltaflow's configuration.
func configCommand(out IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "check the configuration run would use",
		Args:  cobra.ArbitraryArgs,
		RunE:  needCommand,
	}
	cmd.AddCommand(configCheckCommand(out))
	return cmd
}

// configCheckJSON is `config check --json`.
type configCheckJSON struct {
	File   string               `json:"file"` // "" for defaults and environment only
	Valid  bool                 `json:"valid"`
	Errors []string             `json:"errors,omitempty"`
	Config json.RawMessage      `json:"config,omitempty"`
	Probes []daemon.ProbeResult `json:"probes,omitempty"`
}

func configCheckCommand(out IO) *cobra.Command {
	var path string
	var asJSON, probe bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check",
		Short: "validate the configuration and print it with its defaults filled in",
		Long: "check loads the configuration as run does (the --config file, then the environment), prints\n" +
			"the effective configuration, every default filled in and every secret redacted, and with\n" +
			"--probe asks Kafka for the topic's metadata, the table's store for a put-if-absent probe\n" +
			"object (deleted after) and NATS for its JetStream account, each within --timeout.\n\n" +
			"Exit status: 0 valid (and every probe answered), 1 a probe failed, 2 the configuration is\n" +
			"invalid (each error names the key and its line, or its environment variable).",
		Example: `  deltaflow config check
  deltaflow config check --config ./deltaflow.yaml --json
  deltaflow config check --config ./deltaflow.yaml --probe --timeout 10s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return configCheck(cmd.Context(), out.Stdout, path, asJSON, probe, timeout)
		},
	}
	fs := cmd.Flags()
	configFlag(fs, &path, "configuration `FILE` to check (YAML); empty: defaults and environment only")
	jsonFlag(fs, &asJSON)
	fs.BoolVar(&probe, "probe", false, "also connect to Kafka, the table's store and NATS")
	atLeast(fs, &timeout, "timeout", 5*time.Second, time.Millisecond, "how long each --probe waits for an answer")
	return cmd
}

func configCheck(ctx context.Context, w io.Writer, path string, asJSON, probe bool, timeout time.Duration) error {
	res := configCheckJSON{File: path}
	cfg, err := daemon.Load(path, os.Getenv)
	if err != nil {
		if asJSON {
			res.Errors = strings.Split(err.Error(), "\n")
			if werr := writeJSON(w, res); werr != nil {
				return werr
			}
		}
		return exitError{code: exitInvalidConfig, err: err}
	}
	res.Valid = true
	node, err := cfg.EffectiveNode()
	if err != nil {
		return err
	}
	if probe {
		res.Probes = daemon.Probe(ctx, cfg, timeout)
	}
	if asJSON {
		res.Config = daemon.NodeJSON(node)
		err = writeJSON(w, res)
	} else {
		err = writeConfigCheck(w, path, node, res.Probes)
	}
	if err != nil {
		return err
	}
	var failed []string
	for _, p := range res.Probes {
		if !p.OK {
			failed = append(failed, p.Name)
		}
	}
	if len(failed) > 0 {
		return exitError{code: exitProbeFailed, err: fmt.Errorf("configuration valid, but the %s probe failed", strings.Join(failed, " and "))}
	}
	return nil
}

func writeConfigCheck(w io.Writer, path string, node *yaml.Node, probes []daemon.ProbeResult) error {
	source := path
	if source == "" {
		source = "no file (defaults and environment)"
	}
	fmt.Fprintf(w, "# %s: valid. The effective configuration, defaults filled in, secrets redacted:\n", source)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if len(probes) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tRESULT\tTARGET\tDETAIL")
	for _, p := range probes {
		result, detail := "ok", p.Detail
		if !p.OK {
			result, detail = "FAILED", p.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s (%dms)\n", p.Name, result, p.Target, detail, p.Millis)
	}
	return tw.Flush()
}
