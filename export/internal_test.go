package export

import (
	"regexp"
	"strings"
)

// Hooks for the tests of package export_test.

// SimilarPatternsForTest returns the patterns and texts the script's awk
// gets for a match=similar template, newline-separated.
func SimilarPatternsForTest(tmpl string) (string, string) {
	p, t := similarPatterns(tmpl)
	return strings.Join(p, "\n"), strings.Join(t, "\n")
}

// PCRECaptureForTest is pcreCapture.
func PCRECaptureForTest(re *regexp.Regexp) (string, error) { return pcreCapture(re) }

// RuntimeForTest is the shell runtime every exported script starts with.
func RuntimeForTest() string { return runtime }
