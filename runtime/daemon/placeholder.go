package daemon

import (
	"fmt"
	"os"
	"strings"

	"github.com/deltaflow/deltaflow/bridge/kafka"
)

// HostnamePlaceholder in kafka.instance_id stands for the host's name, so
// one config gives every process its own static member id: each replica of
// `docker compose up --scale deltaflow=3` runs in a container with its own
// hostname, which a restarted container keeps (a recreated one gets a new
// one).
const HostnamePlaceholder = "{hostname}"

// hostname names the host for HostnamePlaceholder; tests replace it.
var hostname = os.Hostname

// maxInstanceIDLen is Kafka's bound on group.instance.id (as on topic names).
const maxInstanceIDLen = 249

// expandInstanceID replaces HostnamePlaceholder in kafka.instance_id and
// checks the result is an id Kafka accepts (letters, digits, '.', '_', '-',
// at most 249 of them), so a typo in a placeholder ("{host}") or a hostname
// Kafka would refuse stops the start with the key named, not at the first
// JoinGroup.
func (c *Config) expandInstanceID() error {
	id := c.Kafka.InstanceID
	if id == "" {
		return nil
	}
	if strings.Contains(id, HostnamePlaceholder) {
		h, err := hostname()
		if err != nil {
			return &kafka.ConfigError{Key: "kafka.instance_id", Msg: fmt.Sprintf("%s: %v", HostnamePlaceholder, err)}
		}
		if h == "" {
			return &kafka.ConfigError{Key: "kafka.instance_id", Msg: HostnamePlaceholder + ": the host has no name"}
		}
		id = strings.ReplaceAll(id, HostnamePlaceholder, h)
	}
	if i := strings.IndexAny(id, "{}"); i >= 0 {
		return &kafka.ConfigError{Key: "kafka.instance_id",
			Msg: fmt.Sprintf("unknown placeholder in %q (the one placeholder is %s)", c.Kafka.InstanceID, HostnamePlaceholder)}
	}
	if len(id) > maxInstanceIDLen {
		return &kafka.ConfigError{Key: "kafka.instance_id", Msg: fmt.Sprintf("%q is longer than %d characters", id, maxInstanceIDLen)}
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return &kafka.ConfigError{Key: "kafka.instance_id",
				Msg: fmt.Sprintf("%q has %q; Kafka accepts letters, digits, '.', '_' and '-'", id, r)}
		}
	}
	c.Kafka.InstanceID = id
	return nil
}
