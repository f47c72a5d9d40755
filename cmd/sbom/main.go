// Command sbom writes the SPDX 2.3 JSON SBOM of a Go binary from the build
// information embedded in it (any GOOS/GOARCH: it only reads the file).
//
//	sbom -name deltaflow-1.2.3-linux-arm64 -version 1.2.3 -o deltaflow.spdx.json bin/deltaflow
//
// The document's creation time is SOURCE_DATE_EPOCH (seconds) when set, so
// a release rebuilt from the same commit gets the same document; else now.
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/deltaflow/deltaflow/runtime/devtools/sbom"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	name := fs.String("name", "", "the document's `name` (default: the binary's file name)")
	version := fs.String("version", "", "the release `version` of the main module (default: from the build information)")
	fileName := fs.String("file-name", "", "the binary's `name` in the release (default: the binary's file name)")
	out := fs.String("o", "", "write the document to `file` (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: sbom [flags] BINARY")
	}
	binary := fs.Arg(0)
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w", binary, err)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	created, err := creationTime()
	if err != nil {
		return err
	}
	bin := sbom.Binary{Name: *name, FileName: *fileName, Version: *version, SHA256: hex.EncodeToString(sum[:]), Created: created}
	if bin.FileName == "" {
		bin.FileName = filepath.Base(binary)
	}
	if bin.Name == "" {
		bin.Name = bin.FileName
	}
	doc, err := sbom.New(bi, bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := doc.Write(&buf); err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(*out, buf.Bytes(), 0o644)
}

// creationTime is SOURCE_DATE_EPOCH, else now.
func creationTime() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds", s)
	}
	return time.Unix(sec, 0), nil
}
