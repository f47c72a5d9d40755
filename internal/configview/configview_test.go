package configview_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/deltaflow/deltaflow/internal/configview"
	"github.com/deltaflow/deltaflow/internal/secret"
)

type auth struct {
	User     string        `yaml:"user"`
	Password secret.Secret `yaml:"password"`
}

type section struct {
	Brokers []string      `yaml:"brokers"`
	Wait    time.Duration `yaml:"wait"`
	Auth    auth          `yaml:"auth"`
	Columns []auth        `yaml:"columns"`
	Empty   struct{}      `yaml:"empty"`
}

var sample = section{
	Brokers: []string{"a:9092", "b:9092"},
	Wait:    1500 * time.Millisecond,
	Auth:    auth{User: "alice", Password: "hunter2"},
	Columns: []auth{{User: "x"}, {User: "y"}},
}

func TestLineShowsEveryKeyAndNoSecret(t *testing.T) {
	got := configview.Line("s", sample)
	want := "s{brokers=[a:9092 b:9092] wait=1.5s auth.user=alice auth.password=REDACTED columns=2 empty={}}"
	if got != want {
		t.Errorf("Line =\n %s\nwant\n %s", got, want)
	}
}

func TestLogValueShowsEveryKeyAndNoSecret(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "s", configview.LogValue(sample))
	got := buf.String()
	for _, want := range []string{"s.brokers=\"[a:9092 b:9092]\"", "s.wait=1.5s", "s.auth.user=alice", "s.auth.password=REDACTED", "s.columns=2", "s.empty={}"} {
		if !strings.Contains(got, want) {
			t.Errorf("log line %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "hunter2") {
		t.Errorf("log line shows the secret: %s", got)
	}
}

// A JSON log shows numbers, booleans and nulls as such (issue 30: every
// value of the start-up JSON log was a string).
func TestLogValueKeepsScalarTypes(t *testing.T) {
	type typed struct {
		Count   int           `yaml:"count"`
		Ratio   float64       `yaml:"ratio"`
		On      bool          `yaml:"on"`
		Missing *bool         `yaml:"missing"`
		Wait    time.Duration `yaml:"wait"`
		Name    string        `yaml:"name"`
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "s", configview.LogValue(typed{Count: 3, Ratio: 0.5, On: true, Wait: time.Second, Name: "12"}))
	var line struct {
		S map[string]any `json:"s"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"count": 3.0, "ratio": 0.5, "on": true, "missing": nil, "wait": "1s", "name": "12"}
	if !maps.Equal(line.S, want) {
		t.Errorf("logged %v, want %v", line.S, want)
	}
}
