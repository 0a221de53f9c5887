package runbook

import (
	"fmt"
	"sort"
	"strings"
)

// Diagnostic is one problem found in a runbook, at a file position.
type Diagnostic struct {
	File string
	Pos  Pos
	Msg  string
	// Warning: Cairn read the file anyway (an unknown front-matter key,
	// no front matter). Warnings never stop build or serve; `cairn check
	// --strict` counts them as problems.
	Warning bool
	// Code names a kind of diagnostic that tools may treat apart (""
	// for most).
	Code string
}

// CodeRawHTML marks the warning about raw HTML a page omits; a site that
// renders raw HTML (raw_html: render) drops it.
const CodeRawHTML = "raw-html"

func (d Diagnostic) String() string {
	if d.Warning {
		d.Msg = "warning: " + d.Msg
		d.Warning = false
	}
	switch {
	case d.Pos.Line == 0:
		return fmt.Sprintf("%s: %s", d.File, d.Msg)
	case d.Pos.Col == 0:
		return fmt.Sprintf("%s:%d: %s", d.File, d.Pos.Line, d.Msg)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Pos.Line, d.Pos.Col, d.Msg)
	}
}

// Diagnostics is every problem found in a runbook; as an error it prints one
// problem per line.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Sort orders diagnostics by position, keeping the order of equal ones.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		return a.Pos.Col < b.Pos.Col
	})
}

// lineIndex maps byte offsets of a file to 1-based line and column
// (columns count runes, as editors do).
type lineIndex struct {
	src    []byte
	starts []int
}

func newLineIndex(src []byte) *lineIndex {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return &lineIndex{src: src, starts: starts}
}

func (li *lineIndex) pos(off int) Pos {
	if off < 0 {
		off = 0
	}
	if off > len(li.src) {
		off = len(li.src)
	}
	i := sort.Search(len(li.starts), func(i int) bool { return li.starts[i] > off }) - 1
	col := 1 + len([]rune(string(li.src[li.starts[i]:off])))
	return Pos{Line: i + 1, Col: col}
}

// nearest returns the candidate closest to s by edit distance, for "did you
// mean" hints, or "" when none is close.
func nearest(s string, candidates []string) string {
	// Within a third of the word (one edit for short words): further off,
	// a suggestion such as "did you mean \"for\"" for "ref" misleads.
	best, bestD := "", max(1, len([]rune(s))/3)+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance counts insertions, deletions, substitutions and swaps of
// neighbours ("titel" is one edit from "title").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
