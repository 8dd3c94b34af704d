// Package doccheck holds the test that the Go identifiers the project's
// Markdown documentation (README.md, docs/*.md) names exist: see
// TestDocIdentifiersExist. It has no code of its own.
package doccheck
