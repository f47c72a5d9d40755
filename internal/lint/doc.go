// Package lint holds tests that check the project's structure: which
// packages may depend on which (DESIGN.md, "Layout").
package lint
