package storage

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/deltaflow/deltaflow/internal/secret"
)

// Options are the S3 settings Open uses for s3:// URIs. Empty fields are
// taken from the environment, in this order:
//
//	Endpoint   MINIO_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
//	AccessKey  MINIO_ACCESS_KEY, AWS_ACCESS_KEY_ID
//	SecretKey  MINIO_SECRET_KEY, AWS_SECRET_ACCESS_KEY
//	Region     AWS_REGION, AWS_DEFAULT_REGION
//	CAFile     MINIO_CA_FILE
//
// Endpoint and both keys are required; Region is optional.
type Options struct {
	// Endpoint is host:port or http(s)://host:port.
	Endpoint string
	// AccessKey and SecretKey are static credentials.
	AccessKey, SecretKey string
	// Region is optional.
	Region string
	// Secure selects HTTPS; nil lets the endpoint's scheme decide (plain
	// host:port means HTTP, as on a MinIO next door). Setting it against the
	// endpoint's scheme is an error.
	Secure *bool
	// CAFile is a PEM bundle of the CAs to trust for HTTPS instead of the
	// system pool (optional).
	CAFile string
}

// Open returns the Store a URI names:
//
//	s3://bucket/prefix   (s3a:// too, as Spark configs spell it)
//	file:///abs/path
//	path/to/dir or /abs/path
//
// Local stores are created if missing. ctx is for future backends that must
// talk to a server to open; S3 stores connect lazily.
func Open(ctx context.Context, uri string, opts Options) (Store, error) {
	return openURI(uri, opts, os.Getenv)
}

// CheckCredentials reports what an s3:// (or s3a://) store at uri lacks to
// be opened: its endpoint or keys, in opts or the environment (getenv), as
// Open would say it; nil for other stores, and for a URI Open refuses
// otherwise.
func CheckCredentials(uri string, opts Options, getenv func(string) string) error {
	if u, err := url.Parse(uri); err != nil || (u.Scheme != "s3" && u.Scheme != "s3a") {
		return nil
	}
	_, err := s3Config(opts, getenv)
	return err
}

func openURI(uri string, opts Options, getenv func(string) string) (Store, error) {
	if uri == "" {
		return nil, fmt.Errorf("open store: empty URI")
	}
	if !strings.Contains(uri, "://") {
		return NewLocal(uri)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", uri, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("open store %q: file URI with host %q; want file:///abs/path", uri, u.Host)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("open store %q: file URI without a path", uri)
		}
		return NewLocal(u.Path)
	case "s3", "s3a":
		if u.Host == "" {
			return nil, fmt.Errorf("open store %q: no bucket; want s3://bucket/prefix", uri)
		}
		cfg, err := s3Config(opts, getenv)
		if err != nil {
			return nil, fmt.Errorf("open store %q: %w", uri, err)
		}
		cfg.Bucket, cfg.Prefix = u.Host, u.Path
		return NewS3(cfg)
	default:
		return nil, fmt.Errorf("open store %q: unsupported scheme %q (want s3://, file:// or a path)", uri, u.Scheme)
	}
}

// s3Config fills opts from the environment and checks it.
func s3Config(opts Options, getenv func(string) string) (S3Config, error) {
	first := func(v string, envs ...string) string {
		for _, e := range envs {
			if v != "" {
				break
			}
			v = getenv(e)
		}
		return v
	}
	cfg := S3Config{
		Endpoint:  first(opts.Endpoint, "MINIO_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		AccessKey: first(opts.AccessKey, "MINIO_ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
		SecretKey: secret.Secret(first(opts.SecretKey, "MINIO_SECRET_KEY", "AWS_SECRET_ACCESS_KEY")),
		Region:    first(opts.Region, "AWS_REGION", "AWS_DEFAULT_REGION"),
		// Not AWS_CA_BUNDLE: machines set it globally for their proxies,
		// and a CA file makes a plain-HTTP MinIO an error.
		CAFile: first(opts.CAFile, "MINIO_CA_FILE"),
	}
	switch {
	case cfg.Endpoint == "":
		return S3Config{}, fmt.Errorf("s3 endpoint not set: set storage.endpoint in the --config file, --s3-endpoint, or $MINIO_ENDPOINT (or $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL)")
	case cfg.AccessKey == "":
		return S3Config{}, fmt.Errorf("s3 access key not set: set storage.access_key in the --config file, --s3-access-key, or $MINIO_ACCESS_KEY (or $AWS_ACCESS_KEY_ID)")
	case cfg.SecretKey == "":
		return S3Config{}, fmt.Errorf("s3 secret key not set: set storage.secret_key in the --config file, --s3-secret-key-file, or $MINIO_SECRET_KEY (or $AWS_SECRET_ACCESS_KEY)")
	}
	host, secure, err := splitEndpoint(cfg.Endpoint)
	if err != nil {
		return S3Config{}, err
	}
	if secure != nil && opts.Secure != nil && *secure != *opts.Secure {
		return S3Config{}, fmt.Errorf("s3 endpoint %q conflicts with storage.secure: %t", cfg.Endpoint, *opts.Secure)
	}
	cfg.Endpoint = host
	switch {
	case secure != nil:
		cfg.Secure = *secure
	case opts.Secure != nil:
		cfg.Secure = *opts.Secure
	}
	return cfg, nil
}
