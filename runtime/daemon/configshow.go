package daemon

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/internal/configview"
	"github.com/deltaflow/deltaflow/mapping"
)

// Effective returns the configuration as the daemon runs it: with the
// defaults the kafka and nats sections fill in themselves (the nats
// section's zero fields, the DLQ stream named after the table).
func (c Config) Effective() Config {
	c.Kafka = c.Kafka.Effective()
	c.Table.Columns = effectiveColumns(c.Table.Columns)
	c.Tables = slices.Clone(c.Tables)
	for i := range c.Tables {
		c.Tables[i].Columns = effectiveColumns(c.Tables[i].Columns)
	}
	if len(c.Tables) == 0 {
		c.NATS = c.NATS.Effective(c.Table.Name)
	} else if c.NATS = c.NATS.Effective(c.Tables[0].Name); c.NATS.DLQStream == bridge.DefaultDLQStream(c.Tables[0].Name) {
		c.NATS.DLQStream = bridge.DefaultDLQStream("<NAME>") // each table's own
	}
	return c
}

// effectiveColumns is cols with each one's nullability said (true when
// the file leaves it out), not null.
func effectiveColumns(cols []mapping.Column) []mapping.Column {
	out := slices.Clone(cols)
	for i := range out {
		out[i].Nullable = new(out[i].IsNullable())
	}
	return out
}

// EffectiveNode is the effective configuration as a YAML mapping node, keys in
// the file's order, every secret redacted (secrets and nats.url marshal
// themselves so), the form the configuration does not use left out (the
// empty tables list, or the table section and kafka.topic of a tables
// list). `config check`, the start-up log and String all render it, so
// none can leave a key out.
func (c Config) EffectiveNode() (*yaml.Node, error) {
	n, err := configview.Node(c.Effective())
	if err != nil {
		return nil, err
	}
	if len(c.Tables) == 0 {
		dropKey(n, "tables")
	} else {
		dropKey(n, "table")
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "kafka" {
				dropKey(n.Content[i+1], "topic")
			}
		}
	}
	return n, nil
}

// dropKey removes key from the mapping node m.
func dropKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// NodeJSON renders a YAML node tree as JSON, keeping the keys' order and
// the scalars' types (numbers, booleans, null).
func NodeJSON(n *yaml.Node) json.RawMessage {
	var b strings.Builder
	writeNodeJSON(&b, n)
	return json.RawMessage(b.String())
}

func writeNodeJSON(b *strings.Builder, n *yaml.Node) {
	str := func(s string) {
		j, _ := json.Marshal(s)
		b.Write(j)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		writeNodeJSON(b, n.Content[0])
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			str(n.Content[i].Value)
			b.WriteByte(':')
			writeNodeJSON(b, n.Content[i+1])
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			writeNodeJSON(b, item)
		}
		b.WriteByte(']')
	default:
		switch n.ShortTag() {
		case "!!int", "!!float", "!!bool":
			if json.Valid([]byte(n.Value)) {
				b.WriteString(n.Value)
				return
			}
		case "!!null":
			b.WriteString("null")
			return
		}
		str(n.Value)
	}
}

// LogValue implements slog.LogValuer: the effective configuration, every
// key of it, secrets redacted; a list of sections (table.columns) is
// logged as its length.
func (c Config) LogValue() slog.Value {
	n, err := c.EffectiveNode()
	if err != nil {
		return slog.StringValue(err.Error())
	}
	return configview.NodeLogValue(n)
}

// String describes the effective configuration on one line per section
// (keys of subsections dotted: kafka{... sasl.mechanism=...}), with every
// secret redacted.
func (c Config) String() string {
	root, err := c.EffectiveNode()
	if err != nil {
		return err.Error()
	}
	lines := make([]string, 0, len(root.Content)/2)
	for i := 0; i+1 < len(root.Content); i += 2 {
		lines = append(lines, configview.NodeLine(root.Content[i].Value, root.Content[i+1]))
	}
	return strings.Join(lines, "\n")
}

// GoString keeps %#v from printing secrets.
func (c Config) GoString() string { return c.String() }
