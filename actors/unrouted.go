package actors

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltaflow/deltaflow/mapping"
)

// unrouted is how the readers of a topic's first table tell a record their
// table's filter left out from one no route takes: they map it as every
// other table reading the topic would and try those tables' filters. The
// first table decides so that each record is counted (or dead-lettered)
// once, and in the epoch of one table.
type unrouted struct {
	others []otherRoute
	dlq    bool // dead-letter such records (unrouted: dlq), else skip them
	metric prometheus.Counter
}

// otherRoute is another table reading the topic: its mapping and filter.
type otherRoute struct {
	name   string
	mapper *mapping.Mapper
	where  *mapping.Where
}

// checker returns a reader's own instance: the mappers cloned (a Mapper
// is one goroutine's), with the row and arena they map into.
func (u *unrouted) checker() *unroutedCheck {
	c := &unroutedCheck{unrouted: u, mappers: make([]*mapping.Mapper, len(u.others))}
	for i, o := range u.others {
		c.mappers[i] = o.mapper.Clone()
	}
	return c
}

// unroutedCheck is one reader's unrouted.
type unroutedCheck struct {
	*unrouted
	mappers []*mapping.Mapper
	row     mapping.Row
	arena   mapping.Arena
}

// takenElsewhere reports whether another table reading the topic takes
// rec: it maps there and passes that table's filter. A record whose
// writer schema that table's mapping has not settled yet (not fetched, or
// adding columns there) may be taken: it counts as taken, so that it is
// never dead-lettered here and written there.
func (c *unroutedCheck) takenElsewhere(rec *mapping.Record) bool {
	defer c.arena.Reset()
	c.row.Arena = &c.arena
	for i, o := range c.others {
		c.mappers[i].StartBatch()
		err := c.mappers[i].Map(rec, &c.row)
		if err == nil && o.where.Match(&c.row) {
			return true
		}
		if _, pending := errors.AsType[*mapping.SchemaPendingError](err); pending {
			return true
		}
		if _, change := errors.AsType[*mapping.SchemaChangeError](err); change {
			return true
		}
	}
	return false
}

// reason is an unrouted record's dead letter reason, naming the filters.
func (c *unroutedCheck) reason(own string) string {
	filters := []string{own}
	for _, o := range c.others {
		filters = append(filters, "table "+o.name+": "+o.where.String())
	}
	return "unrouted: no route's filter takes the record (" + strings.Join(filters, "; ") + ")"
}
