// Package lint holds tests that check the project's structure: which
// packages may depend on which (docs/design.md, "Where to start"), and
// that product code never links a test-only package (internal/tests/...,
// storage/storagetest).
package lint
