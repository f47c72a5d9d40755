// Package sbom writes a software bill of materials for a Go binary: an SPDX
// 2.3 JSON document made from the build information the Go linker embeds in
// every binary (debug/buildinfo), so it names exactly the modules compiled
// in, at the versions and with the go.sum hashes the build used. The release
// script (scripts/release.sh) runs it on each release binary through
// ./cmd/sbom.
package sbom

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
)

// Document is an SPDX 2.3 document, with the fields this package fills.
type Document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      CreationInfo   `json:"creationInfo"`
	DocumentDescribes []string       `json:"documentDescribes"`
	Packages          []Package      `json:"packages"`
	Relationships     []Relationship `json:"relationships"`
}

// CreationInfo says when and by what the document was made.
type CreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
	Comment  string   `json:"comment,omitempty"`
}

// Package is one SPDX package: the binary's main module, the Go standard
// library, or a module it depends on.
type Package struct {
	Name                  string        `json:"name"`
	SPDXID                string        `json:"SPDXID"`
	VersionInfo           string        `json:"versionInfo"`
	PackageFileName       string        `json:"packageFileName,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	Checksums             []Checksum    `json:"checksums,omitempty"`
	SourceInfo            string        `json:"sourceInfo,omitempty"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []ExternalRef `json:"externalRefs,omitempty"`
	Comment               string        `json:"comment,omitempty"`
}

// Checksum is a package checksum; Value is lower-case hex.
type Checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

// ExternalRef is a package URL (purl) naming the package for scanners.
type ExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

// Relationship links two SPDX elements (DESCRIBES, DEPENDS_ON).
type Relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// Binary is what the document describes besides the build information.
type Binary struct {
	// Name is the document's name, e.g. deltaflow-1.2.3-linux-arm64.
	Name string
	// FileName is the binary's file name inside the release, e.g. deltaflow.
	FileName string
	// Version is the release version stamped into the binary; empty means
	// the main module's version from the build information.
	Version string
	// SHA256 is the binary's SHA-256, lower-case hex.
	SHA256 string
	// Created is the document's creation time: the release commit's time,
	// so the same commit gives the same document.
	Created time.Time
}

// noAssertion is SPDX's "this document makes no claim about it".
const noAssertion = "NOASSERTION"

// namespaceBase prefixes every document's namespace, which SPDX requires to
// be a unique URI: the binary's hash makes it unique and reproducible.
const namespaceBase = "https://github.com/deltaflow/deltaflow/spdx/"

// New builds the SPDX document of a binary from its build information. The
// main module is the package the document describes; it depends on the Go
// standard library and on every module compiled in (a replaced module is
// listed as its replacement, the original named in the comment).
func New(bi *debug.BuildInfo, bin Binary) (*Document, error) {
	if bi.Main.Path == "" {
		return nil, fmt.Errorf("sbom: the build information names no main module (built with GOPATH or by go run?)")
	}
	if bin.Name == "" || bin.SHA256 == "" {
		return nil, fmt.Errorf("sbom: a document name and the binary's SHA-256 are required")
	}
	version := bin.Version
	if version == "" {
		version = bi.Main.Version
	}
	main := Package{
		Name: bi.Main.Path, SPDXID: "SPDXRef-Package-main", VersionInfo: version,
		PackageFileName: bin.FileName, DownloadLocation: noAssertion,
		Checksums:             []Checksum{{Algorithm: "SHA256", Value: bin.SHA256}},
		SourceInfo:            sourceInfo(bi),
		PrimaryPackagePurpose: "APPLICATION",
		ExternalRefs:          purl(bi.Main.Path, version),
		Comment:               "the binary " + bin.FileName + " (" + platform(bi) + "), built from package " + bi.Path,
	}
	std := Package{
		Name: "stdlib", SPDXID: "SPDXRef-Package-stdlib", VersionInfo: bi.GoVersion,
		DownloadLocation: "https://go.dev/dl/", PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs: purl("stdlib", bi.GoVersion),
		Comment:      "the Go toolchain and standard library the binary was built with",
	}
	doc := &Document{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              bin.Name,
		DocumentNamespace: namespaceBase + url.PathEscape(bin.Name) + "-" + bin.SHA256,
		CreationInfo: CreationInfo{
			Created:  bin.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: deltaflow-sbom (cmd/sbom)"},
			Comment:  "made from the build information embedded in the binary (debug/buildinfo)",
		},
		DocumentDescribes: []string{main.SPDXID},
		Packages:          []Package{main, std},
		Relationships: []Relationship{
			{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: main.SPDXID},
			{Element: main.SPDXID, Type: "DEPENDS_ON", Related: std.SPDXID},
		},
	}
	for i, dep := range bi.Deps {
		p := modulePackage(dep, fmt.Sprintf("SPDXRef-Package-%d", i+1))
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, Relationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID})
	}
	return doc, nil
}

// modulePackage is the SPDX package of one module the binary compiles in.
func modulePackage(m *debug.Module, id string) Package {
	comment := ""
	if m.Replace != nil {
		comment = "replaces " + m.Path + " " + m.Version
		m = m.Replace
	}
	p := Package{
		Name: m.Path, SPDXID: id, VersionInfo: m.Version,
		DownloadLocation: noAssertion, PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs: purl(m.Path, m.Version), Comment: comment,
	}
	if m.Version == "" || m.Version == "(devel)" {
		// A replacement by a local directory has no version or hash.
		p.VersionInfo = noAssertion
		p.ExternalRefs = nil
	}
	if sum, ok := h1Hex(m.Sum); ok {
		p.Checksums = []Checksum{{Algorithm: "SHA256", Value: sum}}
		p.Comment = strings.TrimPrefix(p.Comment+"; ", "; ") + "checksum: the go.sum hash " + m.Sum + " (SHA-256 of the module's file list and file hashes)"
	}
	return p
}

// h1Hex decodes a go.sum "h1:" hash (base64 SHA-256) to hex.
func h1Hex(sum string) (string, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != sha256.Size {
		return "", false
	}
	return hex.EncodeToString(b), true
}

// purl is a Go package URL (pkg:golang/PATH@VERSION), as vulnerability
// scanners match them.
func purl(path, version string) []ExternalRef {
	return []ExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + path + "@" + url.PathEscape(version)}}
}

// setting is one build setting of the binary, "" when absent.
func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// platform is the binary's GOOS/GOARCH.
func platform(bi *debug.BuildInfo) string {
	return setting(bi, "GOOS") + "/" + setting(bi, "GOARCH")
}

// sourceInfo names the commit the binary was built from, when the go
// command stamped it (-buildvcs).
func sourceInfo(bi *debug.BuildInfo) string {
	rev := setting(bi, "vcs.revision")
	if rev == "" {
		return ""
	}
	s := "built from " + setting(bi, "vcs") + " revision " + rev
	if setting(bi, "vcs.modified") == "true" {
		s += " with uncommitted changes"
	}
	return s
}

// Write writes the document as indented JSON.
func (d *Document) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("sbom: writing the document: %w", err)
	}
	return nil
}
