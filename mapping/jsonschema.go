package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/valyala/fastjson"

	"github.com/deltaflow/deltaflow/delta"
)

// ErrJSONSchemaTypeNotSupported is wrapped by the error of a JSON Schema
// whose properties make no columns: a property with no type or several,
// an object with neither properties nor additionalProperties' schema, an
// array without items' schema, a recursive schema. The route names such
// properties in columns (a path to their scalars, or a variant column for
// the whole value), or leaves them out.
var ErrJSONSchemaTypeNotSupported = errors.New("no column type for this JSON Schema type")

// jsonSchemaColumns derives a table's columns from a JSON Schema of an
// object, one per property in the schema's order: string → string (with
// format date-time → timestamp, date → date), integer → long, number →
// double, boolean → boolean, object → struct of its properties (or
// without properties, map<string, T> of its additionalProperties'
// schema), array → array of its items' schema; a type list or a
// oneOf/anyOf of null and one type is that type, nullable. Every column,
// struct field, element and value is nullable: a property need not be
// required, and a later version may drop it.
func jsonSchemaColumns(text string) ([]Column, error) {
	props, err := jsonSchemaProperties(text)
	if err != nil {
		return nil, err
	}
	cols := make([]Column, 0, len(props))
	var errs []string
	for _, pr := range props {
		typ, err := jsonSchemaColumnType(pr.schema, pr.root)
		if err != nil {
			errs = append(errs, fmt.Sprintf("property %s: %v", pr.name, err))
			continue
		}
		cols = append(cols, Column{Name: pr.name, Type: typ, Source: pr.name, Nullable: new(true)})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s (give columns with paths to the values to keep)", ErrJSONSchemaTypeNotSupported, strings.Join(errs, "; "))
	}
	return cols, nil
}

// jsonSchemaProperty is a top-level property of an object schema.
type jsonSchemaProperty struct {
	name   string
	schema *fastjson.Value
	root   *fastjson.Value // for local $refs
}

// jsonSchemaProperties are the top-level properties of an object schema,
// in the schema's order.
func jsonSchemaProperties(text string) ([]jsonSchemaProperty, error) {
	root, err := fastjson.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	schema, err := jsonSchemaDeref(root, root)
	if err != nil {
		return nil, err
	}
	if typ := jsonSchemaTypes(schema); len(typ) != 1 || typ[0] != "object" {
		return nil, fmt.Errorf("the schema is of %s, not of an object", typeList(typ))
	}
	props := schema.GetObject("properties")
	if props == nil {
		return nil, errors.New("the schema has no properties")
	}
	var out []jsonSchemaProperty
	var bad error
	props.Visit(func(k []byte, v *fastjson.Value) {
		name := string(k)
		if strings.Contains(name, ".") && bad == nil {
			bad = fmt.Errorf("property %q: a dot in a name is a path in columns' sources", name)
		}
		out = append(out, jsonSchemaProperty{name: name, schema: v, root: root})
	})
	return out, bad
}

// jsonSchemaColumnType is the column type of a property's schema.
func jsonSchemaColumnType(v, root *fastjson.Value) (string, error) {
	t, err := jsonSchemaDataType(v, root, nil)
	if err != nil {
		return "", err
	}
	return typeDDL(t), nil
}

// jsonSchemaDataType is the Delta type of schema v; inside are the
// object and array schemas v is in, to refuse a recursive one.
func jsonSchemaDataType(v, root *fastjson.Value, inside []*fastjson.Value) (delta.DataType, error) {
	v, err := jsonSchemaDeref(v, root)
	if err != nil {
		return nil, err
	}
	types := jsonSchemaTypes(v)
	format := string(v.GetStringBytes("format"))
	if len(types) == 0 { // a oneOf/anyOf of null and one schema
		for _, key := range []string{"oneOf", "anyOf"} {
			for _, b := range v.GetArray(key) {
				b, err := jsonSchemaDeref(b, root)
				if err != nil {
					return nil, err
				}
				bt := jsonSchemaTypes(b)
				if len(bt) == 1 && bt[0] == "null" {
					continue
				}
				if len(types) > 0 {
					return nil, fmt.Errorf("%s of several types", key)
				}
				types, format, v = bt, string(b.GetStringBytes("format")), b
			}
		}
	}
	var nonNull []string
	for _, t := range types {
		if t != "null" {
			nonNull = append(nonNull, t)
		}
	}
	if len(nonNull) != 1 {
		return nil, fmt.Errorf("of %s: only one type (or it and null) makes a column", typeList(nonNull))
	}
	switch nonNull[0] {
	case "string":
		switch format {
		case "date-time":
			return delta.Timestamp, nil
		case "date":
			return delta.Date, nil
		}
		return delta.String, nil
	case "integer":
		return delta.Long, nil
	case "number":
		return delta.Double, nil
	case "boolean":
		return delta.Boolean, nil
	case "object", "array":
		if slices.Contains(inside, v) {
			return nil, errors.New("a recursive schema: no column holds it")
		}
		inside = append(slices.Clip(inside), v)
	}
	if nonNull[0] == "array" {
		items := v.Get("items")
		if items == nil || items.Type() != fastjson.TypeObject {
			return nil, errors.New("an array without one schema of its items")
		}
		elem, err := jsonSchemaDataType(items, root, inside)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		return &delta.ArrayType{ElementType: elem, ContainsNull: true}, nil
	}
	if nonNull[0] != "object" {
		return nil, fmt.Errorf("an %s", nonNull[0])
	}
	props := v.GetObject("properties")
	if props == nil || props.Len() == 0 {
		values := v.Get("additionalProperties")
		if values == nil || values.Type() != fastjson.TypeObject {
			return nil, errors.New("an object with neither properties nor a schema of its additionalProperties")
		}
		vt, err := jsonSchemaDataType(values, root, inside)
		if err != nil {
			return nil, fmt.Errorf("additionalProperties: %w", err)
		}
		return &delta.MapType{KeyType: delta.String, ValueType: vt, ValueContainsNull: true}, nil
	}
	st := &delta.StructType{}
	props.Visit(func(k []byte, p *fastjson.Value) {
		if err != nil {
			return
		}
		var ft delta.DataType
		if ft, err = jsonSchemaDataType(p, root, inside); err != nil {
			err = fmt.Errorf("property %s: %w", k, err)
			return
		}
		st.Fields = append(st.Fields, delta.StructField{Name: string(k), Type: ft, Nullable: true})
	})
	return st, err
}

// jsonSchemaTypes is a schema's "type": one name or a list.
func jsonSchemaTypes(v *fastjson.Value) []string {
	t := v.Get("type")
	if t == nil {
		return nil
	}
	if s, err := t.StringBytes(); err == nil {
		return []string{string(s)}
	}
	var out []string
	for _, e := range t.GetArray() {
		if s, err := e.StringBytes(); err == nil {
			out = append(out, string(s))
		}
	}
	return out
}

func typeList(types []string) string {
	if len(types) == 0 {
		return "no type"
	}
	return strings.Join(types, ", ")
}

// jsonPointerUnescape undoes a JSON Pointer token's escapes.
var jsonPointerUnescape = strings.NewReplacer("~1", "/", "~0", "~")

// jsonSchemaDeref follows a schema's local $ref ("#/definitions/Plug",
// "#/$defs/Plug") to the schema it names, a few hops at most.
func jsonSchemaDeref(v, root *fastjson.Value) (*fastjson.Value, error) {
	for range 8 {
		ref := v.GetStringBytes("$ref")
		if ref == nil {
			return v, nil
		}
		path, local := strings.CutPrefix(string(ref), "#/")
		if !local {
			return nil, fmt.Errorf("$ref %q: only references inside the schema make columns", ref)
		}
		keys := strings.Split(path, "/")
		for i, k := range keys {
			keys[i] = jsonPointerUnescape.Replace(k)
		}
		if v = root.Get(keys...); v == nil {
			return nil, fmt.Errorf("$ref %q: no such schema", ref)
		}
	}
	return nil, errors.New("$ref: too many hops")
}

// compileJSONSchemaWriter compiles a JSON Schema writer schema: its
// validator, and with an evolving plan, the columns its new top-level
// properties add and those it adds properties inside (columnChanges). The records' values are read as JSON records are.
func compileJSONSchemaWriter(text string, p *plan) writerPlan {
	validator, err := compileJSONSchema(text)
	if err != nil {
		return writerPlan{err: err}
	}
	if p.cfg.Evolve {
		props, err := jsonSchemaProperties(text)
		if err != nil {
			return writerPlan{err: err}
		}
		var fields []namedType
		for _, pr := range props {
			if typ, err := jsonSchemaColumnType(pr.schema, pr.root); err == nil {
				fields = append(fields, namedType{pr.name, typ})
			}
		}
		switch add, err := columnChanges(fields, p); {
		case err != nil:
			return writerPlan{err: err}
		case len(add) > 0:
			return writerPlan{add: add}
		}
	}
	return writerPlan{build: func(p *plan) values {
		return &jsonSchemaValues{json: newJSONValues(p).(*jsonValues), schema: validator, top: map[string]any{}, keys: map[string]string{}}
	}}
}

// jsonSchemaResource is the name a writer schema is compiled under.
const jsonSchemaResource = "deltaflow:writer-schema"

// compileJSONSchema compiles a registry's JSON Schema (draft-07 unless its
// $schema says otherwise, as Confluent's serializers write them), its
// formats annotations only (ignoreFormats). It loads nothing: a $ref
// outside the schema is an error, never a read of a file or a URL the
// schema names.
func compileJSONSchema(text string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(noLoader{})
	if err := c.AddResource(jsonSchemaResource, doc); err != nil {
		return nil, fmt.Errorf("JSON Schema: %w", err)
	}
	sch, err := c.Compile(jsonSchemaResource)
	if err != nil {
		return nil, fmt.Errorf("JSON Schema: %w", err)
	}
	ignoreFormats(sch, map[*jsonschema.Schema]bool{})
	return sch, nil
}

// ignoreFormats drops the format of every schema in v (a *Schema, or a
// []*Schema, as the validator's keywords of several forms hold them), so
// that format is the annotation it is to the producers: confluent-kafka's
// JSONSerializer validates with no format checker and writes "yesterday"
// in a date-time string, which must not make a dead letter here. The
// validator asserts formats in draft-07 and before and has no option to
// stop (AssertFormat only turns them on; "regex" cannot be registered
// over), and a schema without its Format is one without the keyword. seen
// are the schemas done, as a $ref may lead back.
func ignoreFormats(v any, seen map[*jsonschema.Schema]bool) {
	switch v := v.(type) {
	case []*jsonschema.Schema:
		for _, s := range v {
			ignoreFormats(s, seen)
		}
	case *jsonschema.Schema:
		if v == nil || seen[v] {
			return
		}
		seen[v] = true
		v.Format = nil
		for _, s := range []any{v.Ref, v.RecursiveRef, v.Not, v.AllOf, v.AnyOf, v.OneOf, v.If, v.Then, v.Else,
			v.PropertyNames, v.AdditionalProperties, v.UnevaluatedProperties,
			v.Contains, v.Items, v.AdditionalItems, v.PrefixItems, v.Items2020, v.UnevaluatedItems, v.ContentSchema} {
			ignoreFormats(s, seen)
		}
		if v.DynamicRef != nil {
			ignoreFormats(v.DynamicRef.Ref, seen)
		}
		for _, s := range v.Properties {
			ignoreFormats(s, seen)
		}
		for _, s := range v.PatternProperties {
			ignoreFormats(s, seen)
		}
		for _, s := range v.DependentSchemas {
			ignoreFormats(s, seen)
		}
		for _, s := range v.Dependencies { // a *Schema or required names
			ignoreFormats(s, seen)
		}
	}
}

// noLoader refuses every schema a $ref names outside the writer schema.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: deltaflow resolves no references outside the schema", url)
}

// jsonSchemaValues reads JSON records that a JSON Schema validates: a
// record the schema refuses is a dead letter naming where and why.
type jsonSchemaValues struct {
	json   *jsonValues
	schema *jsonschema.Schema
	top    map[string]any // the record's instance, reused
	number []byte         // scratch for a number's text
	// keys are the object keys seen, each string made once: a record's
	// keys are mostly those of the records before it.
	keys map[string]string
}

// maxJSONSchemaKeys bounds keys: records of ever new keys (a map in an
// object) take a string each, as without the cache.
const maxJSONSchemaKeys = 256

func (j *jsonSchemaValues) resolve(value []byte) error {
	if err := j.json.resolve(value); err != nil {
		return err
	}
	j.document(j.json.objs[0])
	if err := j.schema.Validate(j.top); err != nil {
		return &MapError{Reason: "the writer schema refuses the record: " + validationReason(err)}
	}
	return nil
}

// document makes top the instance of the record's object o.
func (j *jsonSchemaValues) document(o *fastjson.Object) {
	clear(j.top)
	o.Visit(func(k []byte, v *fastjson.Value) { j.top[j.key(k)] = j.instance(v) })
}

// key is object key k as a string, made once per key seen.
func (j *jsonSchemaValues) key(k []byte) string {
	key, ok := j.keys[string(k)] // no string is made to look it up
	if !ok {
		key = string(k)
		if len(j.keys) < maxJSONSchemaKeys {
			j.keys[key] = key
		}
	}
	return key
}

// instance is v as the validator takes a document (as jsonschema's
// UnmarshalJSON decodes one: maps, slices, strings, json.Number, bools and
// nil), built over the record fastjson parsed rather than parsed again:
// strings alias the parser's bytes, valid until the next record.
func (j *jsonSchemaValues) instance(v *fastjson.Value) any {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		m := make(map[string]any, o.Len())
		o.Visit(func(k []byte, v *fastjson.Value) { m[j.key(k)] = j.instance(v) })
		return m
	case fastjson.TypeArray:
		vs, _ := v.Array()
		a := make([]any, len(vs))
		for i, e := range vs {
			a[i] = j.instance(e)
		}
		return a
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return unsafe.String(unsafe.SliceData(b), len(b))
	case fastjson.TypeNumber:
		j.number = v.MarshalTo(j.number[:0])
		return json.Number(j.number)
	case fastjson.TypeTrue:
		return true
	case fastjson.TypeFalse:
		return false
	}
	return nil
}

func (j *jsonSchemaValues) cast(c *planColumn, a *Arena, out *cell) (failure, []byte) {
	return j.json.cast(c, a, out)
}

func (j *jsonSchemaValues) kindOf(node int) string { return j.json.kindOf(node) }

// validationReason is a validator's error on one line: each place the
// record fails ("at '/power': got string, want number").
func validationReason(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) > 1 {
		lines = lines[1:] // "jsonschema validation failed with ..."
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(l), "- ")
	}
	reason := strings.Join(lines, "; ")
	if len(reason) > maxValidationReason {
		reason = reason[:maxValidationReason] + "..."
	}
	return reason
}

// maxValidationReason bounds the reason a dead letter carries.
const maxValidationReason = 1000
