package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// avroSchema is a parsed Avro schema: a graph of nodes in which a named
// type used again (or inside itself) is the same node.
type avroSchema struct {
	root *avroNode
}

// avroNode is one schema node.
type avroNode struct {
	typ     string // null, boolean, int, long, float, double, bytes, string, record, enum, array, map, fixed, union
	logical string
	// connect is a primitive's connect.name, Kafka Connect's semantic type
	// (io.debezium.time.ZonedTimestamp): debeziumKind reads it.
	connect  string
	name     string // the full name of a record, enum or fixed
	fields   []avroFieldNode
	items    *avroNode // array items, map values
	branches []*avroNode
	symbols  []string
	size     int
	// precision and scale of a decimal (-1: not a non-negative integer).
	precision, scale int
}

type avroFieldNode struct {
	name string
	typ  *avroNode
}

var avroPrimitives = map[string]bool{"null": true, "boolean": true, "int": true, "long": true, "float": true,
	"double": true, "bytes": true, "string": true}

// parseAvroSchema parses an Avro schema's JSON text (the specification's
// rules for names and namespaces; a schema's own, not Avro's canonical
// form). Ours rather than a library's: the decoder needs only the tree,
// and an Avro library's encoders cost the Pi's image 0.8 MiB.
func parseAvroSchema(text []byte) (*avroSchema, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	p := avroParser{named: map[string]*avroNode{}}
	root, err := p.node(doc, "", 0)
	if err != nil {
		return nil, err
	}
	return &avroSchema{root: root}, nil
}

type avroParser struct {
	named map[string]*avroNode
}

// fullName is name in namespace ns, as the specification resolves it.
func fullName(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

func (p *avroParser) node(v any, ns string, depth int) (*avroNode, error) {
	if depth > avroMaxDepth {
		return nil, errors.New("nested too deep")
	}
	switch s := v.(type) {
	case string:
		if avroPrimitives[s] {
			return &avroNode{typ: s}, nil
		}
		if n, ok := p.named[fullName(s, ns)]; ok {
			return n, nil
		}
		if n, ok := p.named[s]; ok {
			return n, nil
		}
		return nil, fmt.Errorf("unknown type %q", s)
	case []any:
		n := &avroNode{typ: "union"}
		for _, b := range s {
			bn, err := p.node(b, ns, depth+1)
			if err != nil {
				return nil, err
			}
			if bn.typ == "union" {
				return nil, errors.New("a union directly inside a union")
			}
			n.branches = append(n.branches, bn)
		}
		return n, nil
	case map[string]any:
		return p.object(s, ns, depth)
	}
	return nil, fmt.Errorf("a schema is a string, a list or an object, not %v", v)
}

func (p *avroParser) object(o map[string]any, ns string, depth int) (*avroNode, error) {
	typ, _ := o["type"].(string)
	if typ == "" {
		if inner, ok := o["type"]; ok { // {"type": {...}} or {"type": [...]}
			return p.node(inner, ns, depth+1)
		}
		return nil, errors.New(`an object schema without "type"`)
	}
	logical, _ := o["logicalType"].(string)
	switch typ {
	case "record", "error", "enum", "fixed":
	case "array", "map":
		key := map[string]string{"array": "items", "map": "values"}[typ]
		inner, ok := o[key]
		if !ok {
			return nil, fmt.Errorf("%s without %q", typ, key)
		}
		in, err := p.node(inner, ns, depth+1)
		if err != nil {
			return nil, err
		}
		return &avroNode{typ: typ, items: in, logical: logical}, nil
	default:
		n, err := p.node(typ, ns, depth+1) // a primitive or a name, with attributes
		if err != nil {
			return nil, err
		}
		connect, _ := o["connect.name"].(string)
		if logical == "" && connect == "" || !avroPrimitives[n.typ] {
			return n, nil
		}
		c := *n
		c.logical, c.connect = logical, connect
		c.precision, c.scale = intAttr(o, "precision"), scaleAttr(o)
		return &c, nil
	}
	name, _ := o["name"].(string)
	if name == "" {
		return nil, fmt.Errorf("%s without a name", typ)
	}
	if own, ok := o["namespace"].(string); ok {
		ns = own
	}
	full := fullName(name, ns)
	if i := strings.LastIndex(full, "."); i >= 0 {
		ns = full[:i] // names inside take the full name's namespace
	}
	if _, dup := p.named[full]; dup {
		return nil, fmt.Errorf("type %s defined twice", full)
	}
	n := &avroNode{typ: typ, name: full, logical: logical}
	p.named[full] = n // before its fields: they may name it
	switch typ {
	case "enum":
		syms, _ := o["symbols"].([]any)
		if len(syms) == 0 {
			return nil, fmt.Errorf("enum %s without symbols", full)
		}
		for _, s := range syms {
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("enum %s: symbol %v is not a string", full, s)
			}
			n.symbols = append(n.symbols, str)
		}
	case "fixed":
		if n.size = intAttr(o, "size"); n.size < 0 || o["size"] == nil {
			return nil, fmt.Errorf("fixed %s without a size", full)
		}
		n.precision, n.scale = intAttr(o, "precision"), scaleAttr(o)
	default: // record, error
		fields, ok := o["fields"].([]any)
		if !ok {
			return nil, fmt.Errorf("record %s without fields", full)
		}
		seen := map[string]bool{}
		for _, f := range fields {
			fo, _ := f.(map[string]any)
			fname, _ := fo["name"].(string)
			if fname == "" {
				return nil, fmt.Errorf("record %s: a field without a name", full)
			}
			if seen[fname] {
				return nil, fmt.Errorf("record %s: field %s twice", full, fname)
			}
			seen[fname] = true
			ft, ok := fo["type"]
			if !ok {
				return nil, fmt.Errorf("record %s: field %s without a type", full, fname)
			}
			fn, err := p.node(ft, ns, depth+1)
			if err != nil {
				return nil, fmt.Errorf("record %s: field %s: %w", full, fname, err)
			}
			n.fields = append(n.fields, avroFieldNode{name: fname, typ: fn})
		}
	}
	return n, nil
}

// scaleAttr is a decimal's scale: 0 when absent, as the specification has
// it; -1 when not a non-negative integer.
func scaleAttr(o map[string]any) int {
	if _, ok := o["scale"]; !ok {
		return 0
	}
	return intAttr(o, "scale")
}

// intAttr is an integer attribute of a schema object, or -1.
func intAttr(o map[string]any, key string) int {
	if n, ok := o[key].(json.Number); ok {
		if i, err := n.Int64(); err == nil && i >= 0 && i < 1<<31 {
			return int(i)
		}
	}
	return -1
}
