package bridge

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/deltaflow/deltaflow/internal/bytesize"
	"github.com/deltaflow/deltaflow/internal/configview"
	"github.com/deltaflow/deltaflow/internal/secret"
)

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("bridge: invalid config")

// configError is a bad key of the nats section, named as the
// configuration names it (nats.url: ...): it is ErrInvalidConfig.
type configError struct{ msg string }

func (e *configError) Error() string        { return e.msg }
func (e *configError) Is(target error) bool { return target == ErrInvalidConfig }

// Config is the `nats` section of the deltaflow configuration. The zero value
// is valid and means: run an embedded nats-server with JetStream on
// 127.0.0.1:4222, storing under data/nats. Every zero field takes the default
// its comment names.
type Config struct {
	// URL lists the NATS servers to connect to, comma-separated
	// ("nats://a:4222,nats://b:4222"). Default "": run an embedded server.
	URL string `yaml:"url"`
	// User and Password authenticate with a username and password, both
	// required and not blank. Default: none. Cannot be combined with Token
	// or CredsFile.
	User     string        `yaml:"user"`
	Password secret.Secret `yaml:"password"`
	// Token authenticates with a token, not blank. Default: none.
	Token secret.Secret `yaml:"token"`
	// CredsFile is a NATS credentials file (JWT + nkey seed) for operator-mode
	// servers. Default: none. Requires URL.
	CredsFile string `yaml:"creds_file"`
	// TLS configures TLS to an external server. Default: plain TCP unless the
	// URL uses tls://. Requires URL.
	TLS TLSConfig `yaml:"tls"`

	// Listen is the host:port the embedded server listens on so the nats CLI
	// can reach it. Default "127.0.0.1:4222"; port -1 picks a free port.
	// Ignored when URL is set. When User/Password or Token are set, the
	// embedded server requires them from every client; without them it
	// only listens on a loopback address.
	Listen string `yaml:"listen"`
	// StoreDir is where the embedded server keeps JetStream data (the KV
	// mirror and the DLQ). Default "data/nats". Ignored when URL is set.
	// The embedded server's JetStream store is capped at DLQMaxBytes +
	// embeddedStoreHeadroom, not the 75% of the free disk nats-server
	// takes by default.
	StoreDir string `yaml:"store_dir"`

	// KVBucket names the KV bucket of the recovery offsets mirror, shared by
	// all tables (keys start with the table). Default "deltaflow_offsets".
	KVBucket string `yaml:"kv_bucket"`
	// KVReplicas is the bucket's replica count, 1 to 5. Default 1; must be 1
	// with the embedded server.
	KVReplicas int `yaml:"kv_replicas"`
	// DLQStream names the dead-letter stream. Default "DELTAFLOW_DLQ_<TABLE>".
	DLQStream string `yaml:"dlq_stream"`
	// DLQMaxAge is how long dead letters are kept. Default 168h (7 days);
	// negative keeps them until deleted by hand.
	DLQMaxAge time.Duration `yaml:"dlq_max_age"`
	// DLQMaxBytes bounds the DLQ stream. A full stream refuses new letters
	// (JetStream's discard new) rather than dropping stored ones: the epoch
	// holding them waits uncommitted, and deltaflow reports itself
	// unhealthy until room is made. Default 256MiB.
	DLQMaxBytes bytesize.Size `yaml:"dlq_max_bytes"`
	// PublishTimeout bounds every JetStream call (KV put, DLQ acks, setup)
	// whose context has no earlier deadline. Default 5s.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
}

// TLSConfig is the `nats.tls` section.
type TLSConfig struct {
	// CAFile is a PEM bundle of CAs trusted for the server certificate.
	// Default: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key, for
	// servers that verify clients. Default: none; both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify disables server certificate verification. Default
	// false; for tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// enabled reports whether any TLS setting is present.
func (t TLSConfig) enabled() bool { return t != TLSConfig{} }

// defaultCfg holds the defaults every zero field of Config takes.
func defaultCfg() Config {
	return Config{
		Listen:         "127.0.0.1:4222",
		StoreDir:       "data/nats",
		KVBucket:       DefaultKVBucket,
		KVReplicas:     1,
		DLQMaxAge:      7 * 24 * time.Hour,
		DLQMaxBytes:    256 << 20,
		PublishTimeout: 5 * time.Second,
	}
}

// Effective returns c as New uses it for table: every zero field set to
// its default, the DLQ stream's name included.
func (c Config) Effective(table string) Config {
	c = c.withDefaults()
	if c.DLQStream == "" {
		c.DLQStream = DefaultDLQStream(table)
	}
	return c
}

// withDefaults returns c with every zero field set to its default; DLQStream
// depends on the table and is filled in by New.
func (c Config) withDefaults() Config {
	d := defaultCfg()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.StoreDir == "" {
		c.StoreDir = d.StoreDir
	}
	if c.KVBucket == "" {
		c.KVBucket = d.KVBucket
	}
	if c.KVReplicas == 0 {
		c.KVReplicas = d.KVReplicas
	}
	if c.DLQMaxAge == 0 {
		c.DLQMaxAge = d.DLQMaxAge
	}
	if c.DLQMaxBytes == 0 {
		c.DLQMaxBytes = d.DLQMaxBytes
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = d.PublishTimeout
	}
	return c
}

// embedded reports whether this config runs an in-process server.
func (c Config) embedded() bool { return c.URL == "" }

var (
	// JetStream stream names: no whitespace, '.', '*', '>', path separators
	// or non-printable bytes; we stay within the portable set.
	streamNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	// KV bucket names, as nats.go checks them.
	bucketNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// Validate checks c after defaults are applied (zero fields are valid). Each
// error names its key, as in "nats.creds_file: ...", and wraps
// ErrInvalidConfig. Errors never contain secrets.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(key, format string, args ...any) error {
		return &configError{msg: "nats." + key + ": " + fmt.Sprintf(format, args...)}
	}
	if c.embedded() && !embeddedAvailable {
		return bad("url", "required: this build has no embedded NATS server (the image's, -tags nonatsserver); set nats.url or $NATS_URL to the NATS server")
	}
	if !c.embedded() {
		for _, u := range strings.Split(c.URL, ",") {
			pu, err := url.Parse(strings.TrimSpace(u))
			if err != nil || pu.Host == "" {
				return bad("url", "%q is not a server URL like nats://host:4222", secret.RedactURL(u))
			}
		}
	}
	if c.Token != "" && (c.User != "" || c.Password != "") {
		return bad("token", "cannot be combined with nats.user/nats.password")
	}
	if c.Password != "" && c.User == "" {
		return bad("password", "set without nats.user")
	}
	if c.CredsFile != "" {
		if c.embedded() {
			return bad("creds_file", "requires nats.url (the embedded server has no operator)")
		}
		if c.User != "" || c.Token != "" {
			return bad("creds_file", "cannot be combined with nats.user or nats.token")
		}
		if err := readable(c.CredsFile); err != nil {
			return bad("creds_file", "%v", err)
		}
	}
	// A blank credential is none: the embedded server would admit anyone
	// sending it, while the configuration reads as if access were closed.
	// (A client of an external server may get its password later, from
	// NATS_PASSWORD; that server is the door.)
	for _, kv := range [][2]string{{"user", c.User}, {"password", string(c.Password)}, {"token", string(c.Token)}} {
		if kv[1] != "" && blank(kv[1]) {
			return bad(kv[0], "is blank")
		}
	}
	if c.embedded() && c.User != "" && c.Password == "" {
		return bad("password", "empty: the embedded server would admit anyone sending nats.user %q; set a password", c.User)
	}
	if c.TLS.enabled() {
		if c.embedded() {
			return bad("tls", "requires nats.url (the embedded server listens without TLS)")
		}
		if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
			return bad("tls", "cert_file and key_file must be set together")
		}
		for key, f := range map[string]string{"tls.ca_file": c.TLS.CAFile, "tls.cert_file": c.TLS.CertFile, "tls.key_file": c.TLS.KeyFile} {
			if f == "" {
				continue
			}
			if err := readable(f); err != nil {
				return bad(key, "%v", err)
			}
		}
	}
	if c.embedded() {
		host, port, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return bad("listen", "%q is not host:port: %v", c.Listen, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < -1 || p > 65535 {
			return bad("listen", "port %q must be 0-65535, or -1 for any free port", port)
		}
		// Whoever reaches the embedded server may pause deltaflow, read the
		// dead letters and delete the DLQ stream: beyond this host, only
		// with credentials.
		if !loopback(host) && c.User == "" && c.Token == "" {
			return bad("listen", "%q is reachable from other hosts but the embedded server has no credentials: "+
				"set nats.user and nats.password (or nats.token), or listen on 127.0.0.1", c.Listen)
		}
		if c.KVReplicas != 1 {
			return bad("kv_replicas", "must be 1 with the embedded server, got %d", c.KVReplicas)
		}
	}
	if !bucketNameRe.MatchString(c.KVBucket) {
		return bad("kv_bucket", "%q may only contain A-Z, a-z, 0-9, '_' and '-'", c.KVBucket)
	}
	if c.KVReplicas < 1 || c.KVReplicas > 5 {
		return bad("kv_replicas", "must be 1 to 5, got %d", c.KVReplicas)
	}
	if c.DLQStream != "" && !streamNameRe.MatchString(c.DLQStream) {
		return bad("dlq_stream", "%q may only contain A-Z, a-z, 0-9, '_' and '-'", c.DLQStream)
	}
	if c.DLQMaxBytes < 0 {
		return bad("dlq_max_bytes", "must be > 0, got %s", c.DLQMaxBytes)
	}
	if c.PublishTimeout < 0 {
		return bad("publish_timeout", "must be > 0, got %s", c.PublishTimeout)
	}
	return nil
}

// blank reports whether s has nothing but white space.
func blank(s string) bool { return strings.TrimSpace(s) == "" }

// loopback reports whether host (of a listen address) is a loopback
// address; "" and 0.0.0.0 are every interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// String implements fmt.Stringer without revealing any secret: every key
// as the YAML section names it.
func (c Config) String() string { return configview.Line("nats", c) }

// GoString implements fmt.GoStringer so %#v hides secrets too.
func (c Config) GoString() string { return c.String() }

// LogValue implements slog.LogValuer without revealing any secret.
func (c Config) LogValue() slog.Value { return configview.LogValue(c) }

// MarshalYAML implements yaml.Marshaler: the URL's user part is hidden, as
// the secrets hide themselves, so every rendering of the section (String,
// LogValue, the daemon's effective configuration) shows it redacted.
func (c Config) MarshalYAML() (any, error) {
	type plain Config // no methods: keeps MarshalYAML from recursing
	p := plain(c)
	p.URL = secret.RedactURL(c.URL)
	return p, nil
}
