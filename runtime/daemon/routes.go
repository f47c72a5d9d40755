package daemon

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/deltaflow/deltaflow/bridge"
	"github.com/deltaflow/deltaflow/bridge/kafka"
)

// RouteConfig is one entry of the `tables` list: a table (every key of the
// `table` section) and what feeds it: its topics, a row filter, and the
// table's own flush and maintenance settings, whose keys it leaves out
// take the process-wide sections' values.
type RouteConfig struct {
	TableConfig `yaml:",inline"`
	Topics      []string          `yaml:"topics"`
	TopicRegex  string            `yaml:"topic_regex"`
	Where       string            `yaml:"where"`
	Flush       FlushConfig       `yaml:"flush"`
	Maintenance MaintenanceConfig `yaml:"maintenance"`
}

// What the unrouted key may say.
const (
	UnroutedSkip = "skip"
	UnroutedDLQ  = "dlq"
)

// Route is one table's resolved route: its table section, the topics that
// feed it, its row filter, and its flush and maintenance settings.
type Route struct {
	Table       TableConfig
	Topics      []string
	TopicRegex  string // "" none
	Where       string // "" every row
	Flush       FlushConfig
	Maintenance MaintenanceConfig
}

// Routes returns the configured routes: the `tables` list, or the single
// form as one route whose Topics is [kafka.topic], with the process-wide
// flush and maintenance.
func (c *Config) Routes() []Route {
	if len(c.Tables) == 0 {
		return []Route{{Table: c.Table, Topics: []string{c.Kafka.Topic}, Flush: c.Flush, Maintenance: c.Maintenance}}
	}
	out := make([]Route, len(c.Tables))
	for i, t := range c.Tables {
		out[i] = Route{Table: t.TableConfig, Topics: t.Topics, TopicRegex: t.TopicRegex, Where: t.Where, Flush: t.Flush,
			Maintenance: t.Maintenance}
	}
	return out
}

// Route returns the route of the table named name, or an error listing the
// names that exist (for the CLI's --table).
func (c *Config) Route(name string) (Route, error) {
	routes := c.Routes()
	var names []string
	for _, r := range routes {
		if r.Table.Name == name {
			return r, nil
		}
		names = append(names, r.Table.Name)
	}
	slices.Sort(names)
	return Route{}, fmt.Errorf("no table %q in the configuration (tables: %s)", name, strings.Join(names, ", "))
}

// TableView is c as the single form of route r: its table section, its
// first topic as kafka.topic, its flush and maintenance. The daemon's
// per-table steps (opening the table, its engine settings) and the table
// commands read a route through it.
func (c *Config) TableView(r Route) *Config {
	v := *c
	v.Tables = nil
	v.Table, v.Flush, v.Maintenance = r.Table, r.Flush, r.Maintenance
	if len(r.Topics) > 0 {
		v.Kafka.Topic = r.Topics[0]
	}
	return &v
}

// routeTemplate is what an entry of `tables` starts from before its keys
// are decoded over it: the table section's defaults (but uri and name,
// which each entry must give) and the process-wide flush and maintenance
// of c.
func (c *Config) routeTemplate() RouteConfig {
	t := DefaultConfig().Table
	t.URI, t.Name = "", ""
	return RouteConfig{TableConfig: t, Flush: c.Flush, Maintenance: c.Maintenance}
}

// singleOrList refuses a configuration that mixes the single form's keys
// (table, kafka.topic, kafka.start_offsets, or the variables that set
// them) with a tables list, naming where each was set.
func (c *Config) singleOrList(lines keyLines, fromEnv map[string]string) error {
	if len(c.Tables) == 0 {
		return nil
	}
	where := func(key string) string {
		if env, ok := fromEnv[key]; ok {
			return "$" + env
		}
		return fmt.Sprintf("line %d", lines[key])
	}
	var errs []string
	for _, key := range []string{"table", "table.uri", "kafka.topic", "kafka.start_offsets"} {
		if _, inFile := lines[key]; !inFile && fromEnv[key] == "" {
			continue
		}
		switch key {
		case "table", "table.uri":
			if key == "table.uri" && fromEnv[key] == "" {
				continue // the table section's own line says it
			}
			errs = append(errs, fmt.Sprintf("%s (%s) and tables (line %d) together: give every table in tables", key, where(key), lines["tables"]))
		case "kafka.topic":
			errs = append(errs, fmt.Sprintf("kafka.topic (%s) with tables (line %d): each entry names its topics (tables[].topics)", where(key), lines["tables"]))
		default:
			errs = append(errs, fmt.Sprintf("%s (%s) with tables (line %d): start offsets by partition are the single form's; use kafka.start_timestamp or deltaflow seek --table NAME", key, where(key), lines["tables"]))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// validateRoutes checks every entry of the tables list as the single
// form's table is checked, plus what feeds it: its topics or pattern, its
// filter (over its own columns), its flush and maintenance; and that names
// and URIs are unique.
func (c *Config) validateRoutes() []error {
	var errs []error
	names, uris, streams := map[string]int{}, map[string]int{}, map[string]int{}
	if c.Kafka.Mode == kafka.ModePartitions {
		errs = append(errs, fmt.Errorf("kafka.mode: partitions reads one topic; tables need mode group"))
	}
	for i, t := range c.Tables {
		section := fmt.Sprintf("tables[%d]", i)
		bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(section+"."+format, args...)) }
		tableErrs := t.validate(section)
		m, err := c.checkedMapper(t.TableConfig, section)
		if err != nil {
			tableErrs = append(tableErrs, err) // names <section>.columns[i]... or <section>.partition_columns[i]
		}
		errs = append(errs, tableErrs...)
		if j, dup := names[t.Name]; dup && t.Name != "" {
			bad("name: %q is also tables[%d]'s name", t.Name, j)
		}
		names[t.Name] = i
		// Two names JetStream's stream names cannot tell apart (Weather,
		// weather) would write one DLQ stream.
		stream := bridge.DefaultDLQStream(t.Name)
		if j, dup := streams[stream]; dup && t.Name != "" && t.Name != c.Tables[j].Name {
			bad("name: %q and tables[%d]'s %q share the DLQ stream %s", t.Name, j, c.Tables[j].Name, stream)
		}
		streams[stream] = i
		if j, dup := uris[tableIdentity(t.URI)]; dup && t.URI != "" {
			bad("uri: %q is tables[%d]'s table (%q)", t.URI, j, c.Tables[j].URI)
		}
		uris[tableIdentity(t.URI)] = i
		if t.readsRegistry() && len(t.Topics) == 0 && t.Subject == "" {
			bad("subject: the table's topics come from topic_regex only: say which registry subject makes its columns")
		}
		if len(t.Topics) == 0 && t.TopicRegex == "" {
			bad("topics: none, and no topic_regex: give the topics that feed the table")
		}
		for k, topic := range t.Topics {
			if topic == "" {
				bad("topics[%d]: empty topic name", k)
			}
		}
		if t.TopicRegex != "" {
			if _, err := regexp.Compile(t.TopicRegex); err != nil {
				bad("topic_regex: %v", err)
			}
		}
		if t.Where != "" && m != nil {
			if _, err := m.Where(t.Where); err != nil {
				bad("where: %v", err)
			}
		}
		errs = append(errs, t.Flush.validate(section+".flush")...)
		errs = append(errs, t.Maintenance.validate(section+".maintenance")...)
	}
	return errs
}

// tableIdentity is what two spellings of one table's URI share: ./data/t
// and data/t/; s3://b/t and s3a://b/t/.
func tableIdentity(uri string) string {
	if p, ok := localPath(uri); ok {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return filepath.Clean(p)
	}
	if u, err := url.Parse(uri); err == nil && (u.Scheme == "s3" || u.Scheme == "s3a") {
		return "s3://" + u.Host + path.Clean("/"+u.Path)
	}
	return uri
}
