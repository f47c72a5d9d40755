package daemon

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// keyError is a configuration error about one key, with where the file sets
// it: `flush.interval (line 4): "often" is not a duration`.
type keyError struct {
	key  string
	line int
	env  string // the variable that set the value, when no file did
	msg  string
}

func (e *keyError) Error() string {
	if e.env != "" {
		return fmt.Sprintf("%s ($%s): %s", e.key, e.env, e.msg)
	}
	return fmt.Sprintf("%s (line %d): %s", e.key, e.line, e.msg)
}

// keyLines records, for every key the file sets, the line of its value,
// under its full path with list indexes ("table.columns[2].type"), so an
// error found after decoding (Validate's) can name the line too.
type keyLines map[string]int

// tablesNode returns the `tables` list of a parsed document, or nil.
func tablesNode(doc *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "tables" {
			return doc.Content[i+1]
		}
	}
	return nil
}

// resolveTables decodes each entry of the `tables` list (node) over its
// template (routeTemplate): what an entry leaves out takes the table
// section's default or, for flush and maintenance, the process-wide value,
// which the environment may have changed since the file was decoded. The
// walk checked every value.
func (c *Config) resolveTables(node *yaml.Node) error {
	if node == nil || node.Kind != yaml.SequenceNode {
		return nil
	}
	c.Tables = make([]RouteConfig, len(node.Content))
	for i, item := range node.Content {
		c.Tables[i] = c.routeTemplate()
		if err := item.Decode(&c.Tables[i]); err != nil {
			return fmt.Errorf("tables[%d]: %w", i, err)
		}
	}
	return nil
}

// decode decodes YAML over cfg. The node tree is first walked against
// Config's yaml tags, so every error names the key path and line of the
// value at fault, a scalar given for a list of scalars becomes a
// one-element list (`kafka.brokers: host:9092`, as KAFKA_BOOTSTRAP), and an
// empty value ("", [], null) for a key whose default is not empty is
// refused, since it cannot work (`kafka.brokers: []`). It returns the line
// of every key set.
// It also returns the `tables` list, for resolveTables once the
// environment is applied.
func decode(data []byte, cfg *Config) (keyLines, *yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, syntaxLine(err)
	}
	if len(root.Content) == 0 {
		return nil, nil, nil // empty file
	}
	lines, err := decodeNode(root.Content[0], cfg, nil)
	return lines, tablesNode(root.Content[0]), err
}

// decodeNode is decode of a parsed document; fromEnv names the variable
// behind each key an environment document sets (see envDocument).
//
// A key the walk refuses is left out and the rest decoded, so that the
// caller can check the rest too and report every error of a file in one
// run; the error says what was refused.
func decodeNode(doc *yaml.Node, cfg *Config, fromEnv map[string]string) (keyLines, error) {
	w := walker{lines: keyLines{}, env: fromEnv, refused: map[*yaml.Node]bool{}}
	w.walk(doc, reflect.TypeFor[Config](), reflect.ValueOf(keyDefaults()), "", "")
	dropRefused(doc, w.refused)
	if err := doc.Decode(cfg); err != nil {
		return nil, errors.Join(append(w.errs, err)...) // the walk checked every value left: not expected
	}
	return w.lines, errors.Join(w.errs...)
}

// dropRefused removes the key-value pairs whose key is refused from the
// mappings under n.
func dropRefused(n *yaml.Node, refused map[*yaml.Node]bool) {
	if len(refused) == 0 {
		return
	}
	if n.Kind == yaml.MappingNode {
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !refused[n.Content[i]] {
				kept = append(kept, n.Content[i], n.Content[i+1])
			}
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropRefused(c, refused)
	}
}

// walker walks a YAML node tree against a Go type.
type walker struct {
	lines keyLines
	env   map[string]string // key → variable, for a document of the environment
	errs  []error
	// refused are the key nodes of the values the walk refused: left out
	// of the decoding (dropRefused).
	refused map[*yaml.Node]bool
}

func (w *walker) fail(key string, n *yaml.Node, format string, args ...any) {
	w.errs = append(w.errs, &keyError{key: key, line: n.Line, env: w.env[key], msg: fmt.Sprintf(format, args...)})
}

// refusedAt reports whether an error since the first before is key's
// own, or one of its list's items: its value is refused whole (a section's
// keys are refused one by one).
func (w *walker) refusedAt(before int, key string) bool {
	for _, err := range w.errs[before:] {
		ke, ok := err.(*keyError)
		if !ok {
			continue
		}
		if item, isItem := strings.CutPrefix(ke.key, key+"["); ke.key == key || isItem && strings.HasSuffix(item, "]") && !strings.Contains(item, ".") {
			return true
		}
	}
	return false
}

// walk checks node n against type t. key is the path with list indexes (for
// messages), docKey the one with "[]" (keySpecs' keys); def is the
// default value, invalid inside lists.
func (w *walker) walk(n *yaml.Node, t reflect.Type, def reflect.Value, key, docKey string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if def.IsValid() {
			def = def.Elem()
		}
	}
	aliased := n.Kind == yaml.AliasNode
	if aliased {
		n = n.Alias
	}
	if key != "" {
		w.lines[key] = n.Line
	}
	section := t.Kind() == reflect.Struct && !implementsUnmarshaler(t)
	if key != "" && !section && empty(n) {
		// yaml would make it zero (a list) or leave the default (a
		// string): either hides a mistake.
		if s, _ := spec(docKey); def.IsValid() && !def.IsZero() && !s.emptyOK {
			w.fail(key, n, "empty; leave the key out for the default (%s)", defaultText(docKey, def))
		}
		return
	}
	switch {
	case implementsUnmarshaler(t):
		w.leaf(n, t, key)
	case section:
		if n.Kind != yaml.MappingNode {
			if empty(n) {
				return // "kafka:" with nothing under it
			}
			w.fail(key, n, "%s is not a section of keys", describe(n))
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				if near := nearestKey(k.Value, fields); near != "" {
					w.fail(joinKey(key, k.Value), k, "unknown key; did you mean %s?", joinKey(key, near))
				} else {
					w.fail(joinKey(key, k.Value), k, "unknown key")
				}
				w.refused[k] = true
				continue
			}
			var fdef reflect.Value
			if def.IsValid() {
				fdef = def.FieldByIndex(f.Index)
			}
			before := len(w.errs)
			w.walk(v, f.Type, fdef, joinKey(key, k.Value), joinKey(docKey, k.Value))
			if w.refusedAt(before, joinKey(key, k.Value)) {
				w.refused[k] = true // the key keeps its default
			}
			if v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode {
				w.lines[joinKey(key, k.Value)] = k.Line // a section or list is where its key is
			}
		}
	case t.Kind() == reflect.Slice:
		if n.Kind == yaml.ScalarNode && isScalarType(t.Elem()) && !aliased {
			// One value where a list is wanted is a list of one (not
			// through an alias: the anchor may serve a scalar too).
			item := *n
			*n = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: n.Line, Column: n.Column, Content: []*yaml.Node{&item}}
		}
		if n.Kind != yaml.SequenceNode {
			w.fail(key, n, "%s is not a list", describe(n))
			return
		}
		var itemDef reflect.Value
		if t.Elem() == reflect.TypeFor[RouteConfig]() {
			// A route starts from the table section's defaults.
			d := DefaultConfig()
			itemDef = reflect.ValueOf(d.routeTemplate())
		}
		for i, item := range n.Content {
			w.walk(item, t.Elem(), itemDef, fmt.Sprintf("%s[%d]", key, i), docKey+"[]")
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.fail(key, n, "%s is not a mapping", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			w.leaf(k, t.Key(), key+" key")
			w.walk(v, t.Elem(), reflect.Value{}, joinKey(key, k.Value), docKey+".*")
		}
	default:
		w.leaf(n, t, key)
	}
}

// empty reports whether n is "", null or an empty list or mapping.
func empty(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.ShortTag() == "!!null" || (n.Value == "" && n.ShortTag() == "!!str")
	case yaml.SequenceNode, yaml.MappingNode:
		return len(n.Content) == 0
	}
	return false
}

// leaf decodes n into a new t and reports a failure in the key's terms.
func (w *walker) leaf(n *yaml.Node, t reflect.Type, key string) {
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return
	}
	if implementsUnmarshaler(t) {
		// The type's own message, without yaml's "line N: " we add back.
		w.fail(key, n, "%s", linePrefix.ReplaceAllString(err.Error(), ""))
		return
	}
	want := wants(t)
	if n.ShortTag() == "!!int" && t != reflect.TypeFor[time.Duration]() && t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64 {
		w.fail(key, n, "%s is out of range for %s", describe(n), want)
		return
	}
	w.fail(key, n, "%s is not %s", describe(n), want)
}

var linePrefix = regexp.MustCompile(`^(yaml: unmarshal errors:\s*)?line \d+: `)

// defaultText is a key's default as the reference gives it.
func defaultText(docKey string, def reflect.Value) string {
	if s, _ := spec(docKey); s.def != "" {
		return strings.ReplaceAll(s.def, "`", "")
	}
	return formatDefault(def)
}

// describe names a node's value for a message: a scalar quoted, else its kind.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// wants says what a value of type t is written as.
func wants(t reflect.Type) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "a duration (such as 90s, 5m, 1h30m)"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

func isScalarType(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
		return false
	}
	return true
}

// withLines adds to every error of err that starts with a key the file sets
// that key's line, as decode's own errors have it: "flush.interval must be
// > 0" becomes "flush.interval (line 4) must be > 0". A key set by the
// environment is named with its variable instead.
func withLines(err error, lines keyLines, fromEnv map[string]string) error {
	if err == nil || (len(lines) == 0 && len(fromEnv) == 0) {
		return err
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	keys := make([]string, 0, len(lines)+len(fromEnv))
	for k := range lines {
		keys = append(keys, k)
	}
	for k := range fromEnv {
		keys = append(keys, k)
	}
	// Longest first: table.columns[1].type before table.columns.
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		if _, ok := e.(interface{ Unwrap() []error }); ok {
			out = append(out, withLines(e, lines, fromEnv))
			continue
		}
		if _, located := e.(*keyError); located {
			out = append(out, e) // the walk said where
			continue
		}
		out = append(out, annotate(e, keys, lines, fromEnv))
	}
	return errors.Join(out...)
}

// annotated is an error with where its key was set added to its message.
type annotated struct {
	err error
	msg string
}

func (a *annotated) Error() string { return a.msg }
func (a *annotated) Unwrap() error { return a.err }

func annotate(e error, keys []string, lines keyLines, fromEnv map[string]string) error {
	msg := e.Error()
	for _, k := range keys {
		rest, ok := strings.CutPrefix(msg, k)
		if !ok || (rest != "" && !strings.ContainsAny(rest[:1], " :")) {
			continue
		}
		where := fmt.Sprintf(" (line %d)", lines[k])
		if env, ok := fromEnv[k]; ok {
			where = " ($" + env + ")"
		}
		return &annotated{err: e, msg: k + where + rest}
	}
	return e
}

// envDocument is the configuration the environment gives, as a YAML
// document of the keys whose variable (keySpecs' env) is set and not
// empty, so it is decoded, checked and reported exactly as the file is: a
// list takes comma-separated values (KAFKA_BOOTSTRAP=a:9092,b:9092). It
// returns nil when no variable is set, and the variable behind each key.
func envDocument(getenv func(string) string) (*yaml.Node, map[string]string) {
	if getenv == nil {
		return nil, nil
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	fromEnv := map[string]string{}
	for _, k := range configKeys() {
		s, _ := spec(k.key)
		v := getenv(s.env)
		if s.env == "" || v == "" {
			continue
		}
		fromEnv[k.key] = s.env
		// A string key takes the value as is; any other (a bool, a
		// duration) as YAML would read it unquoted.
		leaf := &yaml.Node{Kind: yaml.ScalarNode, Value: v}
		if k.def.Kind() == reflect.String {
			leaf.Tag = "!!str"
		}
		if k.def.Kind() == reflect.Slice {
			leaf = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					leaf.Content = append(leaf.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: item})
				}
			}
		}
		setPath(doc, strings.Split(k.key, "."), leaf)
	}
	if len(fromEnv) == 0 {
		return nil, nil
	}
	return doc, fromEnv
}

// setPath sets path to leaf in the mapping node m, making the sections on
// the way.
func setPath(m *yaml.Node, path []string, leaf *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == path[0] {
			if len(path) == 1 {
				m.Content[i+1] = leaf
			} else {
				setPath(m.Content[i+1], path[1:], leaf)
			}
			return
		}
	}
	key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: path[0]}
	if len(path) == 1 {
		m.Content = append(m.Content, key, leaf)
		return
	}
	section := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, key, section)
	setPath(section, path[1:], leaf)
}

// nearestKey is the key of fields that name is most likely a misspelling
// of (at most two edits away, and fewer than half its letters), or "".
func nearestKey(name string, fields map[string]reflect.StructField) string {
	best, bestDist := "", 0
	for k := range fields {
		d := editDistance(name, k)
		if d > 2 || 2*d >= len(k) {
			continue
		}
		if best == "" || d < bestDist || d == bestDist && k < best {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, with a
// transposition of neighbours one edit (borkers, brokers).
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// yamlLine is the line a YAML syntax error names.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxLine corrects the line of a YAML parser error, which the YAML
// library counts from 0 (its scanner errors, from 1): a key indented one
// space short was reported on the line before it.
func syntaxLine(err error) error {
	msg := err.Error()
	m := yamlLine.FindStringSubmatchIndex(msg)
	if m == nil {
		return err
	}
	rest := msg[m[1]:]
	parser := strings.HasPrefix(rest, "did not find expected") || strings.HasPrefix(rest, "found undefined tag handle") ||
		strings.HasPrefix(rest, "found incompatible YAML document") || strings.HasPrefix(rest, "found duplicate %")
	if !parser {
		return err
	}
	n, _ := strconv.Atoi(msg[m[2]:m[3]])
	return fmt.Errorf("yaml: line %d: %s", n+1, rest)
}
