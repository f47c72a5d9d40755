package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// registryAskTimeout bounds how long `schema show` waits for the registry.
const registryAskTimeout = 10 * time.Second

const schemaExamples = `  deltaflow schema show --table ./data/sensor_events
  deltaflow schema show --config ./deltaflow.yaml --json`

// schemaCommand is `deltaflow schema show`: the table's columns with where
// each came from, and, for a table that reads a schema registry, the
// registry's latest schema of its subject.
func schemaCommand(out IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schema",
		Short:   "show a table's columns and the registry schemas they came from",
		Example: schemaExamples,
		RunE:    needCommand,
	}
	var tf tableFlags
	var asJSON bool
	show := &cobra.Command{
		Use:     "show",
		Short:   "the table's columns, each with its origin (a registry subject and schema id), and its subject's latest schema",
		Example: schemaExamples,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, s, err := tf.snapshot(cmd.Context())
			if err != nil {
				return err
			}
			var subjects []daemon.SubjectSchema
			if tf.config != "" {
				cfg, err := tf.load()
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), registryAskTimeout)
				subjects = cfg.LatestSchemas(ctx)
				cancel()
			}
			if asJSON {
				var columns json.RawMessage
				st, err := s.Schema()
				if err != nil {
					return err
				}
				columns = json.RawMessage(st.SchemaString())
				return writeJSON(out.Stdout, struct {
					Schema   json.RawMessage        `json:"schema"`
					Subjects []daemon.SubjectSchema `json:"subjects,omitempty"`
				}{columns, subjects})
			}
			if err := inspectSchema(out.Stdout, s, false); err != nil {
				return err
			}
			for _, sub := range subjects {
				if sub.Error != "" {
					fmt.Fprintf(out.Stdout, "subject %s (%s): the registry did not say its latest schema: %s\n", sub.Subject, sub.Format, sub.Error)
					continue
				}
				fmt.Fprintf(out.Stdout, "subject %s (%s): the registry's latest schema is id %d\n", sub.Subject, sub.Format, sub.LatestID)
			}
			return nil
		},
	}
	pf := show.Flags()
	tf.register(pf)
	tf.registerVersion(pf)
	jsonFlag(pf, &asJSON)
	cmd.AddCommand(show)
	return cmd
}
