package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestNeverShown(t *testing.T) {
	s := Secret("hunter2")
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "pw", s)
	j, _ := json.Marshal(struct{ P Secret }{s})
	y, _ := yaml.Marshal(struct{ P Secret }{s})
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%q %x %#v %v %s", s, s, s, s, s), logs.String(), string(j), string(y)} {
		if strings.Contains(out, "hunter2") || !strings.Contains(out, Redacted) {
			t.Errorf("secret shown or not redacted: %s", out)
		}
	}
	if string(s) != "hunter2" || Secret("").String() != "" {
		t.Error("value lost")
	}
}
