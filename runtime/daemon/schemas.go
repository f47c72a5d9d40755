package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/mapping"
	"github.com/deltaflow/deltaflow/schemareg"
)

// registryTable is a table section that reads the schema registry.
type registryTable struct {
	*TableConfig
	section string // "table", "tables[2]"
	topic   string // the first topic: its subject is the default
}

// registryTables are the table sections of c that read the schema
// registry.
func (c *Config) registryTables() []registryTable {
	if len(c.Tables) == 0 {
		if c.Table.readsRegistry() {
			return []registryTable{{TableConfig: &c.Table, section: "table", topic: c.Kafka.Topic}}
		}
		return nil
	}
	var out []registryTable
	for i := range c.Tables {
		if t := &c.Tables[i]; t.readsRegistry() {
			rt := registryTable{TableConfig: &t.TableConfig, section: fmt.Sprintf("tables[%d]", i)}
			if len(t.Topics) > 0 {
				rt.topic = t.Topics[0]
			}
			out = append(out, rt)
		}
	}
	return out
}

// keysReadRegistry reports whether some table's record keys are in the
// schema registry's wire format.
func (c *Config) keysReadRegistry() bool {
	if len(c.Tables) == 0 {
		return c.Table.keyReadsRegistry()
	}
	for i := range c.Tables {
		if c.Tables[i].keyReadsRegistry() {
			return true
		}
	}
	return false
}

// subject is the registry subject whose latest schema makes the table's
// columns: table.subject, or Confluent's TopicNameStrategy for its topic.
func (t registryTable) subject() string {
	if t.Subject != "" {
		return t.Subject
	}
	return t.topic + "-value"
}

// resolveSchemas connects the schema registry when some table reads it,
// keeping what it fetches in store, and asks it for each such table's
// subject's latest schema, which makes the table's columns (and checks
// the sources of the columns configured). A registry that does not
// answer is waited for, with /readyz saying so, unless a schema seen
// before (store) stands in; refused credentials fail the start.
func (c *Config) resolveSchemas(ctx context.Context, store schemareg.Store, health *actors.Health, logger *slog.Logger) error {
	tables := c.registryTables()
	if len(tables) == 0 && !c.keysReadRegistry() {
		return nil
	}
	reg, err := schemareg.New(ctx, c.SchemaRegistry, store, logger.With("component", "schema_registry"))
	if err != nil {
		return err
	}
	c.schemas = reg
	for _, t := range tables {
		if t.latest, t.latestOrigin, err = latestSchema(ctx, reg, t, health, logger); err != nil {
			return err
		}
	}
	return nil
}

// ResolveSchemas connects the schema registry for the tables that read it
// and asks it for their subjects' latest schemas, as run does (but without
// the schemas kept in NATS), so that MappingConfig decodes their records.
// It returns the registry, nil when no table reads one; it waits for a
// registry that does not answer until ctx ends.
func (c *Config) ResolveSchemas(ctx context.Context, logger *slog.Logger) (*schemareg.Registry, error) {
	if err := c.resolveSchemas(ctx, nil, actors.NewHealth(), logger); err != nil {
		return nil, err
	}
	return c.schemas, nil
}

// probeRegistry asks the registry for each registry table's subject's
// latest schema, as a start does, and checks the table's columns against
// it: what `config check --probe` says of the registry.
func probeRegistry(ctx context.Context, cfg *Config) (string, error) {
	reg, err := schemareg.New(ctx, cfg.SchemaRegistry, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", err
	}
	var found []string
	for _, t := range cfg.registryTables() {
		id, schema, err := latestOf(ctx, reg, t)
		if err != nil {
			return "", err
		}
		view := *t.TableConfig
		view.latest, view.latestOrigin = schema.Text, schemaOrigin(t.subject(), id)
		m, err := mapping.New(view.mappingConfig(t.section, reg), view.PartitionColumns)
		if err != nil {
			return "", err
		}
		found = append(found, fmt.Sprintf("subject %s: schema id %d, %d columns", t.subject(), id, len(m.Schema().Fields)))
	}
	return strings.Join(found, "; "), nil
}

// latestOf asks reg for the latest schema of t's subject, once.
func latestOf(ctx context.Context, reg *schemareg.Registry, t registryTable) (int, mapping.WriterSchema, error) {
	id, schema, _, err := reg.Latest(ctx, t.subject())
	if errors.Is(err, schemareg.ErrUnauthorized) {
		return 0, schema, fmt.Errorf("%w: %s", err, credentialsHint)
	}
	if err == nil {
		err = t.checkFormat(schema)
	}
	if err != nil {
		return 0, schema, fmt.Errorf("%s: %w", t.section, err)
	}
	return id, schema, nil
}

// SubjectSchema is a registry table's subject, and the id of the latest
// schema the registry has of it, or why it could not say.
type SubjectSchema struct {
	Subject  string         `json:"subject"`
	Format   mapping.Format `json:"format"`
	LatestID int            `json:"latestId,omitempty"`
	Error    string         `json:"error,omitempty"`
}

// LatestSchemas asks the registry, once each, for the latest schema of the
// subject of every table of c that reads one (none: nil).
func (c *Config) LatestSchemas(ctx context.Context) []SubjectSchema {
	tables := c.registryTables()
	if len(tables) == 0 {
		return nil
	}
	out := make([]SubjectSchema, len(tables))
	reg, regErr := schemareg.New(ctx, c.SchemaRegistry, nil, slog.New(slog.DiscardHandler))
	for i, t := range tables {
		out[i] = SubjectSchema{Subject: t.subject(), Format: t.Format}
		err := regErr
		if err == nil {
			out[i].LatestID, _, err = latestOf(ctx, reg, t)
		}
		if err != nil {
			out[i].Error = err.Error()
		}
	}
	return out
}

// registryKey names the registry in the schema store's keys: a digest of
// its URLs, so that two registries sharing a KV bucket (a staging and a
// production one, whose schema ids both start at 1) never read each
// other's schemas.
func registryKey(urls []string) string {
	sorted := slices.Sorted(slices.Values(urls))
	sum := sha256.Sum256([]byte(strings.Join(sorted, ",")))
	return hex.EncodeToString(sum[:8])
}

// credentialsHint says where the registry's credentials come from.
const credentialsHint = "check schema_registry.user and $DELTAFLOW_SCHEMA_REGISTRY_PASSWORD (or $DELTAFLOW_SCHEMA_REGISTRY_TOKEN)"

// registryWait is the longest wait between two asks of a registry that
// does not answer at start.
const registryWait = 30 * time.Second

// checkFormat refuses a subject whose schemas are not the table's format.
func (t registryTable) checkFormat(s mapping.WriterSchema) error {
	if s.Format != t.Format {
		return fmt.Errorf("subject %s holds %s schemas; %s.format is %s", t.subject(), s.Format, t.section, t.Format)
	}
	return nil
}

// schemaOrigin is the Origin of the columns made of a subject's schema.
func schemaOrigin(subject string, id int) string {
	return fmt.Sprintf("subject %s, schema id %d", subject, id)
}

// latestSchema asks reg for the latest schema of t's subject until it
// answers, and returns its text and origin.
func latestSchema(ctx context.Context, reg *schemareg.Registry, t registryTable, health *actors.Health, logger *slog.Logger) (text, origin string, err error) {
	const component = "schema_registry"
	subject := t.subject()
	backoff := 500 * time.Millisecond
	for {
		id, schema, stale, err := reg.Latest(ctx, subject)
		switch {
		case err == nil:
			if err := t.checkFormat(schema); err != nil {
				return "", "", fmt.Errorf("schema_registry: %w", err)
			}
			health.Recover(component)
			if stale {
				logger.Warn("schema registry unreachable: the subject's latest schema seen before stands in for it",
					"subject", subject, "schema_id", id)
			} else {
				logger.Info("schema registry: the table's columns come from the subject's latest schema", "subject", subject, "schema_id", id)
			}
			return schema.Text, schemaOrigin(subject, id), nil
		case errors.Is(err, schemareg.ErrUnauthorized):
			return "", "", fmt.Errorf("schema_registry: %w: %s", err, credentialsHint)
		case ctx.Err() != nil:
			return "", "", fmt.Errorf("schema_registry: subject %s: %w", subject, ctx.Err())
		}
		health.Degrade(component, err.Error())
		logger.Warn("schema registry: waiting for the subject's latest schema", "subject", subject, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, registryWait)
	}
}
