// Package lint holds tests that check the project's structure: which
// packages may depend on which (docs/design.md, "Where to start").
package lint
