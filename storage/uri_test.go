package storage_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltaflow/deltaflow/internal/tests/testenv"
	"github.com/deltaflow/deltaflow/storage"
)

var s3EnvVars = []string{
	"MINIO_ENDPOINT", "MINIO_ACCESS_KEY", "MINIO_SECRET_KEY",
	"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	"AWS_REGION", "AWS_DEFAULT_REGION", "MINIO_CA_FILE",
}

// setEnv clears every variable Open reads, then sets env.
func setEnv(t *testing.T, env map[string]string) {
	for _, k := range s3EnvVars {
		t.Setenv(k, env[k])
	}
}

func TestOpenLocal(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for uri, want := range map[string]string{
		"file://" + dir + "/t1": "file://" + dir + "/t1",
		dir + "/t2":             "file://" + dir + "/t2",
		"t3":                    "file://" + filepath.Join(dir, "t3"),
		"file://localhost/" + strings.TrimPrefix(dir, "/") + "/t4": "file://" + dir + "/t4",
	} {
		s, err := storage.Open(t.Context(), uri, storage.Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", uri, err)
		}
		if _, ok := s.(*storage.Local); !ok || s.URI() != want {
			t.Errorf("Open(%q) = %T %s, want *Local %s", uri, s, s.URI(), want)
		}
	}
}

func TestOpenS3(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name    string
		uri     string
		env     map[string]string
		opts    storage.Options
		wantURI string
		wantErr string // substrings, '|'-separated
	}{
		{
			name:    "minio env",
			uri:     "s3://lake/tables/sensor_events/",
			env:     map[string]string{"MINIO_ENDPOINT": "minio:9000", "MINIO_ACCESS_KEY": "ak", "MINIO_SECRET_KEY": "sk"},
			wantURI: "s3://lake/tables/sensor_events",
		},
		{
			name:    "options win over env; s3a alias; whole bucket",
			uri:     "s3a://lake",
			env:     map[string]string{"MINIO_ENDPOINT": "bad endpoint"},
			opts:    storage.Options{Endpoint: "https://s3.example:443", AccessKey: "a", SecretKey: "s", Secure: &yes},
			wantURI: "s3://lake",
		},
		{
			name:    "aws env",
			uri:     "s3://lake/t",
			env:     map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "eu"},
			wantURI: "s3://lake/t",
		},
		{
			name:    "no endpoint",
			uri:     "s3://lake/t",
			env:     map[string]string{"MINIO_ACCESS_KEY": "ak", "MINIO_SECRET_KEY": "sk"},
			wantErr: "storage.endpoint|--s3-endpoint|$MINIO_ENDPOINT|$AWS_ENDPOINT_URL",
		},
		{
			name:    "no access key",
			uri:     "s3://lake/t",
			env:     map[string]string{"MINIO_ENDPOINT": "minio:9000", "MINIO_SECRET_KEY": "sk"},
			wantErr: "storage.access_key|--s3-access-key|$MINIO_ACCESS_KEY|$AWS_ACCESS_KEY_ID",
		},
		{
			name:    "no secret key",
			uri:     "s3://lake/t",
			env:     map[string]string{"MINIO_ENDPOINT": "minio:9000", "MINIO_ACCESS_KEY": "ak"},
			wantErr: "storage.secret_key|--s3-secret-key-file|$MINIO_SECRET_KEY|$AWS_SECRET_ACCESS_KEY",
		},
		{
			name:    "scheme conflicts with Secure",
			uri:     "s3://lake/t",
			opts:    storage.Options{Endpoint: "https://minio:9000", AccessKey: "a", SecretKey: "s", Secure: &no},
			wantErr: "storage.secure",
		},
		{name: "no bucket", uri: "s3:///t", wantErr: "no bucket"},
		{name: "bad prefix", uri: "s3://lake/a/../b", env: map[string]string{"MINIO_ENDPOINT": "m:1", "MINIO_ACCESS_KEY": "a", "MINIO_SECRET_KEY": "s"}, wantErr: "invalid key"},
		{name: "unsupported scheme", uri: "gs://lake/t", wantErr: `"gs"`},
		{name: "file with host", uri: "file://host/x", wantErr: "host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			s, err := storage.Open(t.Context(), tc.uri, tc.opts)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Open(%q) = %v, want error", tc.uri, s)
				}
				for _, want := range strings.Split(tc.wantErr, "|") {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.uri, err)
			}
			if _, ok := s.(*storage.S3); !ok || s.URI() != tc.wantURI {
				t.Errorf("Open(%q) = %T %s, want *S3 %s", tc.uri, s, s.URI(), tc.wantURI)
			}
		})
	}
}

// The environment's secret is used against a live server: a wrong one fails.
func TestOpenS3UsesEnvCredentials(t *testing.T) {
	cfg := testenv.MinIO(t)
	setEnv(t, map[string]string{"MINIO_ENDPOINT": "http://" + cfg.Endpoint, "MINIO_ACCESS_KEY": cfg.AccessKey, "MINIO_SECRET_KEY": string(cfg.SecretKey)})
	s, err := storage.Open(t.Context(), "s3://"+cfg.Bucket+"/t", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatalf("Put with env credentials: %v", err)
	}
	t.Setenv("MINIO_SECRET_KEY", "wrong")
	s, err = storage.Open(t.Context(), "s3://"+cfg.Bucket+"/t", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "k"); err == nil {
		t.Fatal("Get with a wrong secret succeeded")
	}
}
