package daemon

import "github.com/deltaflow/deltaflow/internal/bytesize"

// ByteSize is a size in bytes that YAML writes as a plain number of bytes or
// a number with a unit: "32MiB", "128MB", "512KiB", "1GiB" (bytesize.Size,
// which the nats section shares).
type ByteSize = bytesize.Size

// ParseByteSize parses "32MiB", "128MB", "1048576" and the like.
func ParseByteSize(s string) (ByteSize, error) { return bytesize.Parse(s) }
