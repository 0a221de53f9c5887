package site

import (
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

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
	var text searchText
	text.WriteString(rb.Meta.Summary + " " + strings.Join(rb.Meta.Tags, " ") + " ")
	cur := 0
	flush := func() {
		entries[cur].Text = clip(string(text.b), maxSearchText)
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

// searchText is strings.Join(strings.Fields(all written), " ") up to the
// first byte past maxSearchText, where clip cuts it: a step's code, often
// many kilobytes, is not copied whole only to be cut.
type searchText struct {
	b     []byte
	space bool // a space is due before the next word
}

func (t *searchText) Reset() { t.b, t.space = t.b[:0], false }

func (t *searchText) WriteString(s string) { t.write(s) }

func (t *searchText) Write(p []byte) { t.write(unsafe.String(unsafe.SliceData(p), len(p))) }

func (t *searchText) WriteByte(c byte) error { t.write(string(c)); return nil }

func (t *searchText) write(s string) {
	for i := 0; i < len(s) && len(t.b) <= maxSearchText; {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiSpace[c] {
				t.space = len(t.b) > 0
			} else {
				if t.space {
					t.b = append(t.b, ' ')
					t.space = false
				}
				t.b = append(t.b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			t.space = len(t.b) > 0
		} else {
			if t.space {
				t.b = append(t.b, ' ')
				t.space = false
			}
			t.b = append(t.b, s[i:i+n]...)
		}
		i += n
	}
}

// asciiSpace is what unicode.IsSpace says of ASCII bytes.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

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
