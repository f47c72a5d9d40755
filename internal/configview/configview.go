// Package configview renders a configuration struct as its YAML encoding
// shows it: every key under its YAML name, in field order, and secrets as
// their types marshal them (secret.Secret shows REDACTED). A config's
// String and LogValue built on it cannot leave a key out or print one
// under another name: adding a field to the struct adds it to both.
package configview

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Node encodes v (a struct, or a pointer to one) as a YAML mapping node.
func Node(v any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return &n, nil
}

// LogValue is v's slog group, subsections as nested groups; a list of
// mappings is logged as its length. An encoding error is logged in its
// place.
func LogValue(v any) slog.Value {
	n, err := Node(v)
	if err != nil {
		return slog.StringValue(err.Error())
	}
	return NodeLogValue(n)
}

// Line is v on one line, name{key=value ...}, keys of subsections dotted
// (sasl.mechanism=PLAIN).
func Line(name string, v any) string {
	n, err := Node(v)
	if err != nil {
		return name + "{" + err.Error() + "}"
	}
	return NodeLine(name, n)
}

// NodeLine is an encoded node on one line (see [Line]); a scalar is
// name=value.
func NodeLine(name string, n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return name + "=" + n.Value
	}
	return name + "{" + strings.Join(flattened(n), " ") + "}"
}

// NodeLogValue is the slog value of an encoded node (see [LogValue]).
func NodeLogValue(n *yaml.Node) slog.Value {
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			return slog.StringValue("{}")
		}
		attrs := make([]slog.Attr, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			attrs = append(attrs, slog.Attr{Key: n.Content[i].Value, Value: NodeLogValue(n.Content[i+1])})
		}
		return slog.GroupValue(attrs...)
	case yaml.SequenceNode:
		items := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return slog.IntValue(len(n.Content))
			}
			items = append(items, item.Value)
		}
		return slog.AnyValue(items)
	}
	return scalarLogValue(n)
}

// scalarLogValue is a scalar as its YAML type says: a JSON log shows a
// number, a boolean or null as such, not as a string.
func scalarLogValue(n *yaml.Node) slog.Value {
	switch n.ShortTag() {
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return slog.Int64Value(i)
		}
	case "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return slog.Float64Value(f)
		}
	case "!!bool":
		if b, err := strconv.ParseBool(n.Value); err == nil {
			return slog.BoolValue(b)
		}
	case "!!null":
		return slog.AnyValue(nil)
	}
	return slog.StringValue(n.Value)
}

// flattened lists an encoded mapping's leaves as dotted key=value pairs, in
// order.
func flattened(n *yaml.Node) []string {
	var out []string
	flatten(n, "", &out)
	return out
}

func flatten(n *yaml.Node, prefix string, out *[]string) {
	if n.Kind == yaml.MappingNode && len(n.Content) > 0 {
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if prefix != "" {
				key = prefix + "." + key
			}
			flatten(n.Content[i+1], key, out)
		}
		return
	}
	*out = append(*out, prefix+"="+fmt.Sprint(NodeLogValue(n).Any()))
}
