package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/deltaflow/deltaflow/storage"
)

// ErrBadPath is wrapped when a file path in the log (add.path, remove.path or
// a deletion vector's) is not a URI this library can decode and place: a bad
// escape, a "." or ".." or empty segment, an unknown deletion vector storage
// type. VACUUM refuses to run while a live file has one.
var ErrBadPath = errors.New("delta: undecodable file path")

// ErrOutsideTable is wrapped when a file path points outside the table root
// (another directory, bucket or file system), which the table's store
// cannot open. Such files are never vacuumed.
var ErrOutsideTable = errors.New("delta: file is outside the table root")

// tableRoot is what paths in the log resolve against: the table store's URI
// split into scheme, authority and path. storage.Store.URI gives the path raw
// (not percent-encoded), so it is compared with decoded paths as it is.
type tableRoot struct {
	uri    string // as the store gave it, for messages
	scheme string // lower case; s3a and s3n folded into s3
	host   string // lower case; "" for file
	path   string // absolute, no trailing '/'; "" at a bucket root
}

// newTableRoot parses a store's URI (storage.Store.URI), or a bare local
// directory.
func newTableRoot(uri string) tableRoot {
	scheme, rest, ok := splitScheme(uri)
	if !ok { // a bare local directory
		return tableRoot{uri: uri, scheme: "file", path: strings.TrimSuffix(uri, "/")}
	}
	host, p := splitAuthority(rest)
	return tableRoot{uri: uri, scheme: foldScheme(scheme), host: foldHost(scheme, host), path: strings.TrimSuffix(p, "/")}
}

// splitScheme splits "scheme:rest" where scheme is an RFC 3986 scheme
// (ALPHA *(ALPHA / DIGIT / "+" / "-" / ".")), as java.net.URI detects one.
// A relative path such as "p=1:2/f" has none: '=' is no scheme character.
func splitScheme(s string) (scheme, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return s[:i], s[i+1:], true
		default:
			return "", s, false
		}
	}
	return "", s, false
}

// splitAuthority splits "//host/path" into host and path; without "//"
// (file:/x) there is no host.
func splitAuthority(s string) (host, p string) {
	rest, ok := strings.CutPrefix(s, "//")
	if !ok {
		return "", s
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i], rest[i:]
	}
	return rest, ""
}

// foldScheme lower-cases a scheme and folds Hadoop's S3 connectors (s3a,
// s3n) into s3: Spark configs name one bucket by all three.
func foldScheme(scheme string) string {
	scheme = strings.ToLower(scheme)
	switch scheme {
	case "s3a", "s3n":
		return "s3"
	}
	return scheme
}

// foldHost lower-cases a host; file://localhost/x is file:///x.
func foldHost(scheme, host string) string {
	host = strings.ToLower(host)
	if strings.EqualFold(scheme, "file") && host == "localhost" {
		return ""
	}
	return host
}

// pathKind says what a pathID's path is.
type pathKind uint8

const (
	// pathInside: a storage key under the table root.
	pathInside pathKind = iota
	// pathOutside: the canonical absolute URI (scheme://host/decoded path)
	// of a file outside the table root.
	pathOutside
	// pathRaw: a path that cannot be decoded, as written; it is the same
	// file only as the byte-identical path, as delta-kernel compares them.
	pathRaw
)

// pathID is the one canonical form of a file path that replay, checkpoints,
// conflict detection and VACUUM compare. Spark resolves paths as URIs, so
// "a%20b", "a b" (as some writers emit it), "/t/a%20b", "file:/t/a%20b" and
// "file:///t/a%20b" are one file of the table at /t; comparing the strings
// would let a remove miss its add and VACUUM delete a live file.
type pathID struct {
	kind pathKind
	path string
}

// id is the canonical form of p; a path that cannot be decoded keeps its
// raw form, so replay still works and only VACUUM and reads refuse it.
func (r tableRoot) id(p string) pathID {
	loc, err := r.locate(p)
	if err != nil {
		return pathID{kind: pathRaw, path: p}
	}
	return loc
}

// locate resolves a file path from the log: a relative path is a URI
// relative to the root (decoded by DecodePath); an absolute URI (file:/x,
// file:///x, s3://b/x, s3a://b/x...) or a scheme-less absolute path (on
// the root's file system) is relativized when it lies under the root.
// ErrBadPath for a path it cannot decode.
func (r tableRoot) locate(p string) (pathID, error) {
	scheme, rest, hasScheme := splitScheme(p)
	if !hasScheme && !strings.HasPrefix(p, "/") {
		key, err := DecodePath(p)
		return pathID{path: key}, err
	}
	host := r.host
	if hasScheme {
		host, rest = splitAuthority(rest)
		scheme, host = foldScheme(scheme), foldHost(scheme, host)
	} else {
		scheme = r.scheme
	}
	decoded, err := url.PathUnescape(rest)
	if err != nil {
		return pathID{}, fmt.Errorf("%w %q: %w", ErrBadPath, p, err)
	}
	if !strings.HasPrefix(decoded, "/") {
		return pathID{}, fmt.Errorf("%w %q: absolute URI without an absolute path", ErrBadPath, p)
	}
	if err := checkSegments(decoded[1:]); err != nil {
		return pathID{}, fmt.Errorf("%w %q: %w", ErrBadPath, p, err)
	}
	if scheme == r.scheme && host == r.host {
		if key, ok := strings.CutPrefix(decoded, r.path+"/"); ok {
			return pathID{path: key}, nil
		}
		if decoded == r.path {
			return pathID{}, fmt.Errorf("%w %q: the table root is no file", ErrBadPath, p)
		}
	}
	return pathID{kind: pathOutside, path: scheme + "://" + host + decoded}, nil
}

// key is the storage key of a file path from the log; ErrOutsideTable when
// the file is not under the root.
func (r tableRoot) key(p string) (string, error) {
	loc, err := r.locate(p)
	if err != nil {
		return "", err
	}
	if loc.kind != pathInside {
		return "", fmt.Errorf("%w %s: %s", ErrOutsideTable, r.uri, loc.path)
	}
	return loc.path, nil
}

// StoreKey returns the key in store of the file at path p from the log
// (add.path, remove.path): relative paths are decoded, absolute URIs under
// the store's root are relativized. ErrOutsideTable for a file elsewhere,
// ErrBadPath for a path that cannot be decoded.
func StoreKey(store storage.Store, p string) (string, error) {
	return newTableRoot(store.URI()).key(p)
}

// checkSegments refuses empty, "." and ".." segments: a key with them is not
// one object (storage.CheckKey), and resolving them would guess.
func checkSegments(key string) error {
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%q segment", seg)
		}
	}
	return nil
}

// DecodePath turns a relative add/remove path from the log into a storage key
// relative to the table root. An absolute URI needs the root to resolve it
// (StoreKey); here it is an ErrBadPath naming the path.
func DecodePath(p string) (string, error) {
	if _, _, abs := splitScheme(p); abs || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w %q: absolute, resolve it against the table root", ErrBadPath, p)
	}
	key, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrBadPath, p, err)
	}
	if err := checkSegments(key); err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrBadPath, p, err)
	}
	return key, nil
}

// dvFile is the file of a deletion vector (PROTOCOL.md "Deletion Vector
// Descriptor Schema", derived field absolutePath): for storageType 'u'
// "<random prefix>/deletion_vector_<uuid>.bin" under the root, the uuid
// Z85-encoded in the last 20 characters of pathOrInlineDv and the prefix
// (possibly empty) before them; for 'p' an absolute path in the format of
// add.path. ok is false for an inline ('i') vector, which has no file.
func (r tableRoot) dvFile(dv *DeletionVector) (loc pathID, ok bool, err error) {
	switch dv.StorageType {
	case "i":
		return pathID{}, false, nil
	case "p":
		loc, err := r.locate(dv.PathOrInlineDv)
		return loc, true, err
	case "u":
		const encodedUUID = 20
		p := dv.PathOrInlineDv
		if len(p) < encodedUUID {
			return pathID{}, true, fmt.Errorf("%w: deletion vector %q: shorter than a Z85 uuid", ErrBadPath, p)
		}
		prefix, enc := p[:len(p)-encodedUUID], p[len(p)-encodedUUID:]
		b, err := z85Decode(enc)
		if err != nil {
			return pathID{}, true, fmt.Errorf("%w: deletion vector %q: %w", ErrBadPath, p, err)
		}
		id, _ := uuid.FromBytes(b) // 20 Z85 characters are always 16 bytes
		key := "deletion_vector_" + id.String() + ".bin"
		if prefix != "" {
			key = prefix + "/" + key
		}
		if err := checkSegments(key); err != nil {
			return pathID{}, true, fmt.Errorf("%w: deletion vector %q: prefix %w", ErrBadPath, p, err)
		}
		return pathID{path: key}, true, nil
	default:
		return pathID{}, true, fmt.Errorf("%w: deletion vector storage type %q", ErrBadPath, dv.StorageType)
	}
}

// z85Alphabet is the Z85 encoding's digits (ZeroMQ RFC 32), the base85
// variant Delta uses for deletion vectors because it is JSON-safe.
const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Digit maps a character to its Z85 value, -1 for a non-digit.
var z85Digit = func() (d [256]int8) {
	for i := range d {
		d[i] = -1
	}
	for i := 0; i < len(z85Alphabet); i++ {
		d[z85Alphabet[i]] = int8(i)
	}
	return d
}()

// z85Decode decodes Z85: each 5 characters are a big-endian base-85 number
// that is 4 bytes.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("z85: length %d is not a multiple of 5", len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := i; j < i+5; j++ {
			d := z85Digit[s[j]]
			if d < 0 {
				return nil, fmt.Errorf("z85: invalid character %q at %d", s[j], j)
			}
			v = v*85 + uint64(d)
		}
		if v > 1<<32-1 {
			return nil, fmt.Errorf("z85: group at %d overflows 32 bits", i)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(v))
	}
	return out, nil
}
