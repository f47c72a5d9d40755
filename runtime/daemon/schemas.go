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
	"github.com/deltaflow/deltaflow/schemareg"
)

// registryTables are the table sections of c that read the schema
// registry, with the topic whose subject they default to.
func (c *Config) registryTables() (tables []*TableConfig, topics []string) {
	if len(c.Tables) == 0 {
		if c.Table.readsRegistry() {
			return []*TableConfig{&c.Table}, []string{c.Kafka.Topic}
		}
		return nil, nil
	}
	for i := range c.Tables {
		if t := &c.Tables[i]; t.readsRegistry() {
			topic := ""
			if len(t.Topics) > 0 {
				topic = t.Topics[0]
			}
			tables, topics = append(tables, &t.TableConfig), append(topics, topic)
		}
	}
	return tables, topics
}

// subjectOf is the registry subject whose latest schema makes table t's
// columns: table.subject, or Confluent's TopicNameStrategy for topic.
func subjectOf(t *TableConfig, topic string) string {
	if t.Subject != "" {
		return t.Subject
	}
	return topic + "-value"
}

// resolveSchemas connects the schema registry when some table reads it,
// keeping what it fetches in store, and asks it for each such table's
// subject's latest schema, which makes the table's columns (and checks
// the sources of the columns configured). A registry that does not
// answer is waited for, with /readyz saying so, unless a schema seen
// before (store) stands in; refused credentials fail the start.
func (c *Config) resolveSchemas(ctx context.Context, store schemareg.Store, health *actors.Health, logger *slog.Logger) error {
	tables, topics := c.registryTables()
	if len(tables) == 0 {
		return nil
	}
	reg, err := schemareg.New(ctx, c.SchemaRegistry, store, logger.With("component", "schema_registry"))
	if err != nil {
		return err
	}
	c.schemas = reg
	for i, t := range tables {
		subject := subjectOf(t, topics[i])
		if t.latest, err = latestSchema(ctx, reg, subject, health, logger); err != nil {
			return err
		}
	}
	return nil
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

// registryWait is the longest wait between two asks of a registry that
// does not answer at start.
const registryWait = 30 * time.Second

// latestSchema asks reg for subject's latest schema until it answers.
func latestSchema(ctx context.Context, reg *schemareg.Registry, subject string, health *actors.Health, logger *slog.Logger) (string, error) {
	const component = "schema_registry"
	backoff := 500 * time.Millisecond
	for {
		id, text, stale, err := reg.Latest(ctx, subject)
		switch {
		case err == nil:
			health.Recover(component)
			if stale {
				logger.Warn("schema registry unreachable: the subject's latest schema seen before stands in for it",
					"subject", subject, "schema_id", id)
			} else {
				logger.Info("schema registry: the table's columns come from the subject's latest schema", "subject", subject, "schema_id", id)
			}
			return text, nil
		case errors.Is(err, schemareg.ErrUnauthorized):
			return "", fmt.Errorf("schema_registry: %w: check schema_registry.user and $DELTAFLOW_SCHEMA_REGISTRY_PASSWORD "+
				"(or $DELTAFLOW_SCHEMA_REGISTRY_TOKEN)", err)
		case ctx.Err() != nil:
			return "", fmt.Errorf("schema_registry: subject %s: %w", subject, ctx.Err())
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
