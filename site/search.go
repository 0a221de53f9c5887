package site

import (
	"strings"

	gast "github.com/yuin/goldmark/ast"

	"github.com/cairn-dev/cairn/runbook"
	rbast "github.com/cairn-dev/cairn/runbook/ast"
)

// SearchEntry is one searchable section: a runbook's introduction or a step.
type SearchEntry struct {
	Slug    string `json:"slug"`
	Title   string `json:"title"`
	Step    string `json:"step,omitempty"`
	Heading string `json:"heading"`
	Text    string `json:"text"`
	Lang    string `json:"lang"`
}

// maxSearchText bounds each entry so the index stays small on big sites.
const maxSearchText = 2000

// searchEntries collects the plain text of each step. The page script
// matches substrings, which works for Korean without word segmentation.
func searchEntries(rb *runbook.Runbook) []SearchEntry {
	intro := SearchEntry{Slug: rb.Slug, Title: rb.Meta.Title, Heading: rb.Meta.Title, Lang: rb.Meta.Lang}
	entries := []SearchEntry{intro}
	var text strings.Builder
	text.WriteString(rb.Meta.Summary + " " + strings.Join(rb.Meta.Tags, " ") + " ")
	cur := 0
	flush := func() {
		entries[cur].Text = clip(strings.Join(strings.Fields(text.String()), " "), maxSearchText)
		text.Reset()
	}
	_ = gast.Walk(rb.Doc, func(n gast.Node, entering bool) (gast.WalkStatus, error) {
		if !entering {
			return gast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *rbast.Step:
			flush()
			st := rb.Steps[n.Index]
			entries = append(entries, SearchEntry{Slug: rb.Slug, Title: rb.Meta.Title, Step: st.ID, Heading: st.Title, Lang: rb.Meta.Lang})
			cur = len(entries) - 1
			return gast.WalkSkipChildren, nil
		case *rbast.CodeBlock:
			b := rb.Blocks[n.Index]
			if b.Role == runbook.RoleExec || b.Role == runbook.RoleDisplay {
				text.WriteString(b.Content)
				text.WriteByte(' ')
			}
			return gast.WalkSkipChildren, nil
		case *rbast.Container:
			text.WriteString(n.Title + " ")
		case *gast.Text:
			text.Write(n.Segment.Value(rb.Body))
			text.WriteByte(' ')
		case *gast.String:
			text.Write(n.Value)
		case *gast.CodeBlock:
			text.Write(n.Lines().Value(rb.Body))
		}
		return gast.WalkContinue, nil
	})
	flush()
	return entries
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
