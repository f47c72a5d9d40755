package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/deltaflow/deltaflow/internal/sim"
)

// Formats the throughput stages read (Options.Format).
const (
	FormatJSON = "json"
	FormatAvro = "avro"
)

// sensorBinaryConfig maps the sensor events in a binary format through a
// registry (sim.AvroSchema's records, sensorProto's messages) to the Spark
// job's columns (but raw_payload: a binary record has no payload string);
// the verbs are the registry's URL, the format and the subject.
const sensorBinaryConfig = `schema_registry:
  url: %s
table:
  format: %s
  subject: %s
  columns:
    - {name: device_id, type: string, source: device_id, required: true}
    - {name: device_type, type: string, source: device_type, required: true}
    - {name: event_time, type: timestamp, source: ingested_at, required: true}
    - {name: linkquality, type: integer, source: payload.linkquality}
    - {name: contact, type: boolean, source: payload.contact}
    - {name: battery, type: integer, source: payload.battery}
    - {name: power, type: double, source: payload.power}
    - {name: voltage, type: double, source: payload.voltage}
    - {name: current, type: double, source: payload.current}
    - {name: energy, type: double, source: payload.energy}
    - {name: plug_state, type: string, source: payload.state}
    - {name: processed_at, type: timestamp, source: now()}
    - {name: event_date, type: date, source: date(event_time)}
`

// registryRun is what a throughput run of a registry format needs: a
// schema registry (srfake, served over HTTP for the stage children), the
// topic's schema registered under <topic>-value, and the stages'
// configuration file.
type registryRun struct {
	registry *srfake.Registry
	id       int
	config   string
}

func newRegistryRun(dir, topic, format string, schema sr.Schema) (registryRun, error) {
	reg := srfake.New()
	id, _, err := reg.RegisterSchema(topic+"-value", schema)
	if err != nil {
		reg.Close()
		return registryRun{}, err
	}
	r := registryRun{registry: reg, id: id, config: filepath.Join(dir, format+".yaml")}
	if err := os.WriteFile(r.config, fmt.Appendf(nil, sensorBinaryConfig, reg.URL(), format, topic+"-value"), 0o600); err != nil {
		reg.Close()
		return registryRun{}, err
	}
	return r, nil
}

func (r registryRun) close()             { r.registry.Close() }
func (r registryRun) configFile() string { return r.config }

// avroTopic is an Avro throughput run's registry and sim.AvroSchema.
type avroTopic struct {
	registryRun
	schema *avro.Schema
}

func newAvroTopic(dir, topic string) (*avroTopic, error) {
	r, err := newRegistryRun(dir, topic, FormatAvro, sr.Schema{Schema: sim.AvroSchema})
	if err != nil {
		return nil, err
	}
	return &avroTopic{registryRun: r, schema: avro.MustParse(sim.AvroSchema)}, nil
}

// encode appends ev as the registry's wire format of sim.AvroSchema to
// b, with twmb/avro: an encoder deltaflow did not write.
func (a *avroTopic) encode(b []byte, ev sim.Event) ([]byte, error) {
	payload := map[string]any{"linkquality": int32(ev.LinkQuality)}
	if ev.DeviceType == sim.SmartPlug {
		payload["power"], payload["voltage"], payload["current"], payload["energy"], payload["state"] =
			ev.Power, ev.Voltage, ev.Current, ev.Energy, ev.State
	} else {
		payload["contact"], payload["battery"] = ev.Contact, int32(ev.Battery)
	}
	rec := map[string]any{"device_id": ev.DeviceID, "device_type": ev.DeviceType, "ingested_at": ev.IngestedAt.UTC().Truncate(time.Microsecond),
		"payload": payload}
	return sr.AppendEncode(b, rec, new(sr.ConfluentHeader), a.id, nil, func(b []byte, v any) ([]byte, error) {
		return a.schema.AppendEncode(b, v)
	})
}

// binaryTopic is a topic of the sensor events in a binary format through a
// schema registry: avroTopic, protoTopic.
type binaryTopic interface {
	// encode appends ev in the registry's wire format to b.
	encode(b []byte, ev sim.Event) ([]byte, error)
	// configFile is the stages' configuration.
	configFile() string
	close()
}

// newBinaryTopic is the registry and configuration of a format's topic.
func newBinaryTopic(format, dir, topic string) (binaryTopic, error) {
	if format == FormatProtobuf {
		return newProtoTopic(dir, topic)
	}
	return newAvroTopic(dir, topic)
}

// produceBinary produces the throughput run's events (the same as the
// JSON run's: same seed) to topic in b's format.
func (k *kafkaEnv) produceBinary(ctx context.Context, b binaryTopic, topic string, events, devices int) (int64, error) {
	return k.produceWith(ctx, topic, events, devices, 0, 1, b.encode)
}
