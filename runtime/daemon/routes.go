package daemon

import (
	"fmt"
	"slices"
	"strings"
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

// Routes returns the configured routes: the single form as one route whose
// Topics is [kafka.topic], with the process-wide flush and maintenance.
func (c *Config) Routes() []Route {
	return []Route{{Table: c.Table, Topics: []string{c.Kafka.Topic}, Flush: c.Flush, Maintenance: c.Maintenance}}
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
	v.Table, v.Flush, v.Maintenance = r.Table, r.Flush, r.Maintenance
	if len(r.Topics) > 0 {
		v.Kafka.Topic = r.Topics[0]
	}
	return &v
}
