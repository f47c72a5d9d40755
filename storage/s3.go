package storage

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/deltaflow/deltaflow/internal/secret"
)

// s3PartSize bounds PutStream's memory: minio-go buffers one part at a time
// for streams of unknown size. 16 MiB × 10,000 parts allows 156 GiB objects.
const s3PartSize = 16 << 20

// S3Config says where an S3 store lives and how to reach it.
type S3Config struct {
	// Endpoint is host:port, or a URL whose scheme (http/https) sets Secure.
	Endpoint string
	// AccessKey and SecretKey are static credentials; the secret never
	// prints itself.
	AccessKey string
	SecretKey secret.Secret
	// Region is optional; empty lets minio-go ask the server.
	Region string
	// Secure selects HTTPS.
	Secure bool
	// CAFile is a PEM bundle of the CAs to trust for HTTPS instead of the
	// system pool (a MinIO with a private CA); it requires Secure.
	CAFile string
	// Bucket must exist; NewS3 does not create it.
	Bucket string
	// Prefix is the store root inside the bucket ("" for the whole bucket);
	// leading and trailing slashes are ignored.
	Prefix string
}

// String describes the config, the secret key redacted.
func (c S3Config) String() string {
	type plain S3Config // no methods: avoids recursing into String
	return fmt.Sprintf("S3Config%+v", plain(c))
}

// GoString keeps %#v from printing the secret too.
func (c S3Config) GoString() string { return "storage." + c.String() }

// S3 is a Store under a prefix of an S3 bucket, through minio-go with
// path-style addressing (MinIO's default; no DNS per bucket needed).
type S3 struct {
	client *minio.Client
	bucket string
	prefix string // "" or ends with '/'
}

var _ Store = (*S3)(nil)

// NewS3 returns a Store for cfg. It does not contact the server: a missing
// bucket or wrong credentials show up on the first call.
func NewS3(cfg S3Config) (*S3, error) {
	host, secure, err := splitEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3 store: %w", err)
	}
	if secure == nil {
		secure = &cfg.Secure
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: bucket is empty")
	}
	opts := &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, string(cfg.SecretKey), ""),
		Secure:       *secure,
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
	}
	if cfg.CAFile != "" {
		if !*secure {
			return nil, fmt.Errorf("s3 store %s: a CA file needs HTTPS (an https:// endpoint or Secure)", host)
		}
		if opts.Transport, err = caTransport(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("s3 store %s: %w", host, err)
		}
	}
	client, err := minio.New(host, opts)
	if err != nil {
		return nil, fmt.Errorf("s3 store %s: %w", host, err)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("s3 store prefix: %w", err)
		}
		prefix += "/"
	}
	return &S3{client: client, bucket: cfg.Bucket, prefix: prefix}, nil
}

// caTransport is minio-go's default HTTPS transport trusting only the CAs
// in the PEM file caFile.
func caTransport(caFile string) (*http.Transport, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ca file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca file %s: no PEM certificates", caFile)
	}
	tr, err := minio.DefaultTransport(true)
	if err != nil {
		return nil, err
	}
	tr.TLSClientConfig.RootCAs = pool
	return tr, nil
}

// splitEndpoint accepts "host:port" or "http(s)://host:port[/]" and returns
// the host and, when a scheme was given, whether it is https.
func splitEndpoint(ep string) (host string, secure *bool, err error) {
	if ep == "" {
		return "", nil, errors.New("endpoint is empty")
	}
	if !strings.Contains(ep, "://") {
		return ep, nil, nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", nil, fmt.Errorf("endpoint %q: %w", ep, err)
	}
	var s bool
	switch u.Scheme {
	case "https":
		s = true
	case "http":
	default:
		return "", nil, fmt.Errorf("endpoint %q: scheme must be http or https", ep)
	}
	if u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return "", nil, fmt.Errorf("endpoint %q: want scheme://host[:port] without a path", ep)
	}
	return u.Host, &s, nil
}

// URI implements Store: s3://bucket/prefix, or s3://bucket for the whole bucket.
func (s *S3) URI() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// String is the URI: never the credentials.
func (s *S3) String() string { return s.URI() }

// GoString keeps %#v from dumping the client, which holds the credentials.
func (s *S3) GoString() string { return "storage.S3(" + s.URI() + ")" }

// Client is the underlying minio-go client, for tests and admin tasks.
func (s *S3) Client() *minio.Client { return s.client }

// Endpoint is the server's URL (scheme://host:port), without credentials:
// the URI names only the bucket, and errors about the server name this.
func (s *S3) Endpoint() string { return s.client.EndpointURL().String() }

func (s *S3) name(op, key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if n := len(s.prefix) + len(key); n > PortableLimits.Key {
		// minio-go refuses it too, with an error of no type to know it by.
		return "", fmt.Errorf("%s: %w %q: %d bytes with the prefix, past S3's %d", op, ErrInvalidKey, key, n, PortableLimits.Key)
	}
	return s.prefix + key, nil
}

// s3Error maps S3 error responses to the package sentinels, keeping the
// response (errors.As finds the minio.ErrorResponse) for logs and tests.
func s3Error(op, key string, err error) error {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.Code == "NoSuchKey":
			return fmt.Errorf("%s %s: %w (%w)", op, key, ErrNotExist, err)
		// If-None-Match: * on an existing key: S3 and MinIO answer 412
		// PreconditionFailed; S3 answers 409 ConditionalRequestConflict when
		// a concurrent conditional write to the key is still in flight.
		case resp.StatusCode == http.StatusPreconditionFailed, resp.Code == "PreconditionFailed",
			resp.Code == "ConditionalRequestConflict":
			return fmt.Errorf("%s %s: %w (%w)", op, key, ErrExist, err)
		}
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	name, err := s.name("get", key)
	if err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, s3Error("get", key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj) // the request happens on first read
	if err != nil {
		return nil, s3Error("get", key, err)
	}
	return data, nil
}

// s3Reader serves ReadAt with ranged GETs through *minio.Object.
type s3Reader struct {
	obj  *minio.Object
	size int64
}

func (r *s3Reader) ReadAt(p []byte, off int64) (int, error) { return r.obj.ReadAt(p, off) }
func (r *s3Reader) Close() error                            { return r.obj.Close() }
func (r *s3Reader) Size() int64                             { return r.size }

// Open implements Store with one HEAD request; each ReadAt is a ranged GET.
// If the object is replaced after Open, reads fail rather than mix two
// versions (minio-go sends If-Match with the ETag it saw first).
func (s *S3) Open(ctx context.Context, key string) (Reader, error) {
	name, err := s.name("open", key)
	if err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, s3Error("open", key, err)
	}
	info, err := obj.Stat()
	if err != nil {
		obj.Close()
		return nil, s3Error("open", key, err)
	}
	return &s3Reader{obj: obj, size: info.Size}, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	name, err := s.name("stat", key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, s3Error("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: info.Size, ModTime: info.LastModified}, nil
}

func (s *S3) put(ctx context.Context, op, key string, r io.Reader, size int64, opts minio.PutObjectOptions) error {
	name, err := s.name(op, key)
	if err != nil {
		return err
	}
	opts.ContentType = "application/octet-stream"
	opts.PartSize = s3PartSize
	if _, err := s.client.PutObject(ctx, s.bucket, name, r, size, opts); err != nil {
		return s3Error(op, key, err)
	}
	return nil
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	return s.put(ctx, "put", key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
}

// PutIfAbsent implements Store with If-None-Match: *, which the server checks
// atomically. If minio-go retries a request whose first attempt landed but
// whose response was lost, the retry reports ErrExist for our own object;
// callers that must know (the Delta committer) re-read the object.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	var opts minio.PutObjectOptions
	opts.SetMatchETagExcept("*")
	return s.put(ctx, "put if absent", key, bytes.NewReader(data), int64(len(data)), opts)
}

// PutStream implements Store. Objects bigger than 16 MiB, or of unknown size,
// go up as a multipart upload that becomes visible only when completed.
func (s *S3) PutStream(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.put(ctx, "put stream", key, r, size, minio.PutObjectOptions{})
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	opts := minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}
	if startAfter != "" {
		opts.StartAfter = s.prefix + startAfter
	}
	var out []ObjectInfo
	for obj := range s.client.ListObjects(ctx, s.bucket, opts) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list %q: %w", prefix, obj.Err)
		}
		key := strings.TrimPrefix(obj.Key, s.prefix)
		// Skip "directory" markers (keys ending in '/', made by some tools)
		// and anything else that is not a valid key of this store.
		if CheckKey(key) != nil || key <= startAfter {
			continue
		}
		out = append(out, ObjectInfo{Key: key, Size: obj.Size, ModTime: obj.LastModified})
	}
	// S3 promises UTF-8 binary order, which is byte order; sorting anyway is
	// cheap insurance against gateways that differ.
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete implements Store with batched DeleteObjects requests (up to 1000
// keys each). It returns the first error.
func (s *S3) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	ch := make(chan minio.ObjectInfo)
	go func() {
		defer close(ch)
		for _, k := range keys {
			select {
			case ch <- minio.ObjectInfo{Key: s.prefix + k}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var first error
	for e := range s.client.RemoveObjects(ctx, s.bucket, ch, minio.RemoveObjectsOptions{}) {
		if first == nil {
			first = fmt.Errorf("delete %s: %w", strings.TrimPrefix(e.ObjectName, s.prefix), e.Err)
		}
	}
	if first == nil && ctx.Err() != nil {
		first = fmt.Errorf("delete: %w", ctx.Err())
	}
	return first
}
