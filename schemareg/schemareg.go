// Package schemareg is deltaflow's client of a Confluent Schema Registry:
// it fetches the writer schemas that registry-encoded records name by id,
// keeps them for the process (and in a Store across restarts, so a restart
// while the registry is down still decodes every id seen before), and
// gives them to the mappers without blocking (mapping.Schemas). The HTTP
// client is franz-go's pkg/sr.
package schemareg

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/deltaflow/deltaflow/internal/secret"
	"github.com/deltaflow/deltaflow/internal/tlsfiles"
	"github.com/deltaflow/deltaflow/mapping"
)

// Config is the `schema_registry` section.
type Config struct {
	// URL is the registry's base URL, or several (tried in turn).
	URL []string `yaml:"url"`
	// User and Password are HTTP basic auth; Token a bearer token.
	User     string        `yaml:"user"`
	Password secret.Secret `yaml:"password"`
	Token    secret.Secret `yaml:"token"`
	// CAFile, CertFile and KeyFile are PEM files for an https registry.
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// Timeout bounds one request. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultTimeout is the default Config.Timeout.
const DefaultTimeout = 10 * time.Second

// Enabled reports whether a registry is configured.
func (c Config) Enabled() bool { return len(c.URL) > 0 }

// ErrUnauthorized is a registry's 401 or 403: the credentials are wrong,
// which no retry fixes.
var ErrUnauthorized = errors.New("the schema registry refused the credentials")

// Store keeps fetched schemas across restarts (the JetStream KV): a
// small key-value map, read whole at start.
type Store interface {
	// Load returns every entry stored.
	Load(ctx context.Context) (map[string]string, error)
	// Save stores an entry.
	Save(ctx context.Context, key, value string) error
}

// Store keys: a schema's text by id (an Avro schema's as "id.<n>", as
// before other formats came; the others' "id.<n>.<FORMAT>"), and a
// subject's latest schema id.
func idKey(id int, f mapping.Format) string {
	if f == mapping.Avro {
		return "id." + strconv.Itoa(id)
	}
	return "id." + strconv.Itoa(id) + "." + string(f)
}

func subjectKey(subject string) string {
	return "subject." + base64.RawURLEncoding.EncodeToString([]byte(subject))
}

// Registry fetches and keeps writer schemas. It is safe for concurrent use.
type Registry struct {
	cl     *sr.Client
	store  Store // nil: memory only
	logger *slog.Logger

	mu      sync.RWMutex
	schemas map[int]mapping.WriterSchema
	missing map[int]error  // ids the registry does not have, or that no table reads
	latest  map[string]int // subject → latest id, as last seen (also in the store)
}

// New returns a Registry for cfg, with the schemas store holds (store may
// be nil). It does not contact the registry.
func New(ctx context.Context, cfg Config, store Store, logger *slog.Logger) (*Registry, error) {
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	opts := []sr.ClientOpt{sr.URLs(cfg.URL...), sr.HTTPClient(&http.Client{Timeout: timeout}),
		sr.UserAgent("deltaflow")}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, sr.BasicAuth(cfg.User, string(cfg.Password)))
	}
	if cfg.Token != "" {
		opts = append(opts, sr.BearerToken(string(cfg.Token)))
	}
	if cfg.CAFile != "" || cfg.CertFile != "" {
		tc, err := tlsfiles.Files{CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}.Config("schema_registry")
		if err != nil {
			return nil, err
		}
		opts = append(opts, sr.DialTLSConfig(tc))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema_registry: %w", err)
	}
	r := &Registry{cl: cl, store: store, logger: logger, schemas: map[int]mapping.WriterSchema{}, missing: map[int]error{},
		latest: map[string]int{}}
	if store != nil {
		stored, err := store.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("load the schemas kept from earlier runs: %w", err)
		}
		for k, v := range stored {
			if n, isID := strings.CutPrefix(k, "id."); isID {
				n, f, _ := strings.Cut(n, ".")
				if f == "" {
					f = string(mapping.Avro)
				}
				if id, err := strconv.Atoi(n); err == nil {
					r.schemas[id] = mapping.WriterSchema{Format: mapping.Format(f), Text: v}
				}
			} else if enc, isSubject := strings.CutPrefix(k, "subject."); isSubject {
				subject, err1 := base64.RawURLEncoding.DecodeString(enc)
				id, err2 := strconv.Atoi(v)
				if err1 == nil && err2 == nil {
					r.latest[string(subject)] = id
				}
			}
		}
	}
	return r, nil
}

// Schema implements mapping.Schemas.
func (r *Registry) Schema(id int) (s mapping.WriterSchema, known bool, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok := r.schemas[id]; ok {
		return s, true, nil
	}
	if err := r.missing[id]; err != nil {
		return s, true, err
	}
	return s, false, nil
}

// Fetch asks the registry for schema id until it answers or ctx ends:
// an outage or a slow registry is waited out with backoff (each failure
// is passed to retrying, which reports it), never made a dead letter. An
// id the registry does not have, or a schema no format reads, is
// remembered as such (Schema then says why). Only ErrUnauthorized and ctx's error end
// it early.
func (r *Registry) Fetch(ctx context.Context, id int, retrying func(error)) error {
	if _, known, _ := r.Schema(id); known {
		return nil
	}
	backoff := 250 * time.Millisecond
	for {
		s, err := r.cl.SchemaByID(ctx, id)
		if err == nil {
			if err = r.keep(ctx, id, s); err == nil {
				return nil
			}
		}
		switch status := statusOf(err); {
		case status == http.StatusNotFound:
			r.forget(id, mapping.ErrSchemaNotFound)
			return nil
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			return fmt.Errorf("schema id %d: %w (HTTP %d)", id, ErrUnauthorized, status)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		retrying(fmt.Errorf("fetch schema id %d: %w", id, err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// Latest returns the latest version of subject: its id and schema.
// When the registry cannot be reached, the latest version seen before (by
// this process or, through the store, an earlier one) stands in for it, so
// a restart while the registry is down goes on; stale says so.
func (r *Registry) Latest(ctx context.Context, subject string) (id int, schema mapping.WriterSchema, stale bool, err error) {
	s, err := r.cl.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		switch st := statusOf(err); {
		case st == http.StatusUnauthorized || st == http.StatusForbidden:
			return 0, schema, false, fmt.Errorf("subject %s: %w (HTTP %d)", subject, ErrUnauthorized, st)
		case st == 0: // not reached
			r.mu.RLock()
			id, seen := r.latest[subject]
			schema, have := r.schemas[id]
			r.mu.RUnlock()
			if seen && have {
				return id, schema, true, nil
			}
		}
		return 0, schema, false, fmt.Errorf("subject %s: %w", subject, err)
	}
	schema, unreadable, err := r.writerSchema(ctx, s.Schema, s.ID)
	if err == nil && unreadable != nil {
		err = unreadable
	}
	if err != nil {
		return 0, schema, false, fmt.Errorf("subject %s version %d (id %d): %w", subject, s.Version, s.ID, err)
	}
	if err := r.keepReadable(ctx, s.ID, schema); err != nil {
		return 0, schema, false, err
	}
	if r.store != nil {
		if err := r.store.Save(ctx, subjectKey(subject), strconv.Itoa(s.ID)); err != nil {
			return 0, schema, false, fmt.Errorf("keep subject %s's latest id: %w", subject, err)
		}
	}
	r.mu.Lock()
	r.latest[subject] = s.ID
	r.mu.Unlock()
	return s.ID, schema, false, nil
}

// keep remembers schema id, in the store too; a schema deltaflow cannot
// read is remembered as such. An error is the registry's or the store's.
func (r *Registry) keep(ctx context.Context, id int, s sr.Schema) error {
	schema, unreadable, err := r.writerSchema(ctx, s, id)
	switch {
	case err != nil:
		return err
	case unreadable != nil:
		r.forget(id, unreadable)
		return nil
	}
	return r.keepReadable(ctx, id, schema)
}

// keepReadable remembers schema id, in the store too.
func (r *Registry) keepReadable(ctx context.Context, id int, schema mapping.WriterSchema) error {
	if r.store != nil {
		if err := r.store.Save(ctx, idKey(id, schema.Format), schema.Text); err != nil {
			return fmt.Errorf("keep schema id %d: %w", id, err)
		}
	}
	r.mu.Lock()
	r.schemas[id] = schema
	r.mu.Unlock()
	return nil
}

func (r *Registry) forget(id int, why error) {
	r.mu.Lock()
	r.missing[id] = why
	r.mu.Unlock()
}

// writerSchema is a registry's schema id as the mappers take it, or why
// none can read it (unreadable); err is the registry's failure to answer
// what a Protobuf schema's references or serialized form need.
func (r *Registry) writerSchema(ctx context.Context, s sr.Schema, id int) (ws mapping.WriterSchema, unreadable, err error) {
	ws.Text = s.Schema
	switch s.Type {
	case sr.TypeAvro:
		ws.Format = mapping.Avro
	case sr.TypeJSON:
		ws.Format = mapping.JSONSchema
	case sr.TypeProtobuf:
		ws.Format = mapping.Protobuf
		ws.Text, err = r.protobufSet(ctx, s, id)
		_, bad := errors.AsType[*schemaError](err)
		if st := statusOf(err); bad || st == http.StatusNotFound || st == http.StatusUnprocessableEntity {
			return ws, err, nil // the schema, or a reference the registry lacks
		}
		return ws, nil, err
	default:
		return ws, fmt.Errorf("a %s schema, which deltaflow does not read", s.Type), nil
	}
	if len(s.References) > 0 {
		return ws, fmt.Errorf("the schema references %d other schemas (%s, ...), which deltaflow resolves for Protobuf only",
			len(s.References), s.References[0].Subject), nil
	}
	return ws, nil, nil
}

// statusOf is the HTTP status of a registry's answer, or 0.
func statusOf(err error) int {
	if re, ok := errors.AsType[*sr.ResponseError](err); ok {
		return re.StatusCode
	}
	return 0
}
