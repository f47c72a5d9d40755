package delta

import "strings"

// NullPartitionDir is the directory name Hive and Spark use for a null (or
// empty) partition value.
const NullPartitionDir = "__HIVE_DEFAULT_PARTITION__"

// hiveEscape marks the bytes Spark's ExternalCatalogUtils.escapePathName
// escapes in a partition directory name: controls, DEL and "#%'*/:=?\{[]^.
// Non-ASCII bytes, space and '}' stay raw.
var hiveEscape = byteSet("\"#%'*/:=?\\{[]^", true)

// uriEscape marks the bytes Spark's Path-to-URI conversion encodes in
// add.path: controls, DEL, space and "#%<>?[\]^`{|}. '/' separates segments
// and non-ASCII stays raw.
var uriEscape = byteSet(" \"#%<>?[\\]^`{|}", true)

func byteSet(chars string, controls bool) (set [256]bool) {
	for i := 0; i < len(chars); i++ {
		set[chars[i]] = true
	}
	if controls {
		for b := 0; b < 0x20; b++ {
			set[b] = true
		}
		set[0x7f] = true
	}
	return set
}

func escapeBytes(s string, set *[256]bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if set[s[i]] {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if set[c] {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// EscapePartitionName escapes a partition column name or value for use in a
// directory name, as Spark does. The result never contains '/', so a value
// such as "../../etc" stays one directory below the table root.
func EscapePartitionName(s string) string { return escapeBytes(s, &hiveEscape) }

// PartitionDir is the relative directory (no trailing slash) holding the
// files of one partition: "col1=v1/col2=v2" with Hive escaping; a nil or
// empty value becomes __HIVE_DEFAULT_PARTITION__. Columns follow the table's
// partitionColumns order. It is "" for an unpartitioned table.
func PartitionDir(columns []string, values map[string]*string) string {
	var b strings.Builder
	for i, c := range columns {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(EscapePartitionName(c))
		b.WriteByte('=')
		if v := values[c]; v == nil || *v == "" {
			b.WriteString(NullPartitionDir)
		} else {
			b.WriteString(EscapePartitionName(*v))
		}
	}
	return b.String()
}

// EncodePath turns a relative storage key into the add.path URI Spark writes:
// controls, space and "#%<>?[\]^`{|} are percent-encoded, so the directory
// "p=a%3Ab" becomes "p=a%253Ab". A colon that would make the first segment
// read as a URI scheme ("a+:b") is encoded too (RFC 3986 §4.2); partition
// directories never have one, their '=' comes first.
func EncodePath(key string) string {
	enc := escapeBytes(key, &uriEscape)
	if _, _, scheme := splitScheme(enc); scheme {
		i := strings.IndexByte(enc, ':')
		enc = enc[:i] + "%3A" + enc[i+1:]
	}
	return enc
}
