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

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://user:hunter2@host:4222", "nats://" + Redacted + "@host:4222"},
		{"nats://s3cr3t-token@host:4222", "nats://" + Redacted + "@host:4222"},
		{"nats://a:pw1@h1:4222, nats://b:pw2@h2:4222", "nats://" + Redacted + "@h1:4222,nats://" + Redacted + "@h2:4222"},
		{"%zz:pw@host", Redacted + "@host"}, // unparseable: only what follows the @
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
