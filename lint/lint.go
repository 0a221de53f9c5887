// Package lint holds the runbook checks that belong to one tool or one
// procedure rather than to the runbook format: each registers a
// runbook.BlockLint from init, and a program that imports this package
// (cmd/cairn does) applies them wherever it parses a runbook. Add a lint as
// a file here with its own test; docs/architecture.md says when a check
// belongs here and when in the model.
package lint
