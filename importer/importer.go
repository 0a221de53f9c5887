// Package importer rewrites Markdown written for other tools — a README, a
// Runme notebook, a page of a Hugo or mkdocs site — into a Cairn runbook in
// the full format: front matter with a title, steps with explicit ids,
// blocks with ids and Cairn attributes. It edits the source text at the
// positions the runbook model gives, so everything else (prose, spacing,
// other blocks) stays byte for byte.
package importer

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

// Options say what the import decides for the reader.
type Options struct {
	// Target, when set (local or kube), makes every bash, sh and shell
	// block that has no role of its own an executable block there.
	Target runbook.Target
}

// Result is one converted file.
type Result struct {
	Source []byte
	// Warnings are what the converted runbook still carries (other tools'
	// front-matter keys, words after a fence's language).
	Warnings runbook.Diagnostics
	Steps    int
	Blocks   int // executable
	// Confirm is how many executable blocks ask before they run: the
	// import marked those that change things (rm, kubectl delete, helm,
	// a block in <details> or under a clean-up heading) confirm=.
	Confirm int
	Changes []string
}

type edit struct {
	start, end int
	text       string
}

// Convert rewrites src (read from path) into a Cairn runbook. A file that
// has Cairn errors is refused with them (a runbook.Diagnostics): fix those
// first; `cairn check` names them.
func Convert(path string, src []byte, opts Options) (*Result, error) {
	switch opts.Target {
	case runbook.TargetNone, runbook.TargetLocal, runbook.TargetKube:
	default:
		return nil, fmt.Errorf("target %q: use local or kube", opts.Target)
	}
	rb, err := runbook.Parse(path, src)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	var edits []edit
	ids := map[string]bool{}
	for _, b := range rb.Blocks {
		if b.ID != "" {
			ids[b.ID] = true
		}
	}

	if rb.BodyOffset == 0 {
		// No front matter: the title heading moves into one.
		fm := "---\ntitle: " + strconv.Quote(rb.Meta.Title) + "\n---\n\n"
		if rb.Meta.TitleFromHeading {
			sp := rb.Meta.TitleSpan
			edits = append(edits, edit{sp[0], skipBlankLine(src, sp[1]), ""})
			res.Changes = append(res.Changes, fmt.Sprintf("front matter with the title %q from the # heading", rb.Meta.Title))
		} else {
			res.Changes = append(res.Changes, fmt.Sprintf("front matter with the title %q from the file name", rb.Meta.Title))
		}
		start := 0
		if bytes.HasPrefix(src, []byte("\ufeff")) {
			start = 3
		}
		edits = append(edits, edit{start, start, fm})
	}

	for _, st := range rb.Steps {
		if st.Explicit {
			continue
		}
		if !runbook.ValidID(st.ID) {
			// A title in another script: its derived id (the page's
			// anchor) is kept; {#id} takes only [a-z0-9-].
			res.Changes = append(res.Changes, fmt.Sprintf("step %q keeps its derived id %q (add {#an-id} to the heading to choose one)", st.Title, st.ID))
			continue
		}
		ls, le := lineAt(src, st.Pos.Line)
		line := strings.TrimRight(string(src[ls:le]), "\r\n")
		if i := strings.LastIndexByte(line, '{'); i >= 0 && strings.HasSuffix(strings.TrimSpace(line), "}") {
			edits = append(edits, edit{ls + i + 1, ls + i + 1, "#" + st.ID + " "})
		} else {
			trimmed := strings.TrimRight(line, " \t")
			edits = append(edits, edit{ls + len(trimmed), ls + len(trimmed), " {#" + st.ID + "}"})
		}
		res.Changes = append(res.Changes, fmt.Sprintf("step %q gets the id %s", st.Title, st.ID))
	}

	// Blocks: ids made explicit, other tools' attributes turned into
	// Cairn's, shell blocks made executable when asked.
	perStep := map[*runbook.Step]int{}
	for _, b := range rb.Blocks {
		exec := b.Role == runbook.RoleExec
		makeExec := !exec && b.Role == runbook.RoleDisplay && opts.Target != "" && runbook.IsShellLang(b.Lang)
		if exec || makeExec {
			perStep[b.Step]++
		}
		if !b.Foreign && b.Extra == nil && !makeExec && (!exec || b.Explicit) {
			continue
		}
		id := b.ID
		if id == "" && (exec || makeExec) {
			prefix := "intro"
			if b.Step != nil {
				prefix = b.Step.ID
				if !runbook.ValidID(prefix) {
					prefix = fmt.Sprintf("step-%d", b.Step.Number)
				}
			}
			id = fmt.Sprintf("%s-%d", prefix, perStep[b.Step])
			for i := 2; ids[id]; i++ {
				id = fmt.Sprintf("%s-%d-%d", prefix, perStep[b.Step], i)
			}
			ids[id] = true
		}
		ls, le := b.Span[0], b.Span[0]
		for le < len(src) && src[le] != '\n' {
			le++
		}
		line := string(src[ls:le])
		fence := fenceOf(line)
		var attrs []string
		if id != "" {
			attrs = append(attrs, "#"+id)
		}
		target := b.Target
		if makeExec {
			target = opts.Target
		}
		if target != "" {
			attrs = append(attrs, "target="+string(target))
		}
		// The Cairn attributes as the parser read them; Runme-only ones
		// (b.Extra) are dropped.
		hasTitle, hasConfirm := false, false
		for _, a := range b.Attrs {
			if a.Key == "id" || a.Key == "target" {
				continue
			}
			hasTitle = hasTitle || a.Key == "title"
			hasConfirm = hasConfirm || a.Key == "confirm"
			attrs = append(attrs, a.Key+"="+strconv.Quote(a.Value))
		}
		why := ""
		if (makeExec || exec && b.Foreign) && !hasConfirm {
			heading, inDetails := blockContext(src, b.Span[0])
			if why = risk(b.Content, heading, inDetails); why != "" {
				attrs = append(attrs, "confirm="+strconv.Quote("imported by cairn import: "+why+"; check it before it runs"))
			}
		}
		if b.Title != "" && !hasTitle { // title= outside the braces
			attrs = append(attrs, "title="+strconv.Quote(b.Title))
		}
		info := b.Lang
		if len(attrs) > 0 {
			info += " {" + strings.Join(attrs, " ") + "}"
		}
		if b.Words != "" {
			info += " " + b.Words
		}
		edits = append(edits, edit{ls, le, fence + info})
		what := "display-only"
		if target != "" {
			what = "target=" + string(target)
		}
		if why != "" {
			what += ", asks for confirmation: " + why
		}
		res.Changes = append(res.Changes, fmt.Sprintf("line %d: block %s (%s)", b.Pos.Line, orDash(id), what))
	}

	out := apply(src, edits)
	conv, err := runbook.Parse(path, out)
	if err != nil {
		return nil, fmt.Errorf("the converted file does not parse (a bug in cairn import; the input is unchanged): %w", err)
	}
	res.Source = out
	res.Warnings = conv.Warnings
	res.Steps = len(conv.Steps)
	for _, b := range conv.Blocks {
		if b.Executable() {
			res.Blocks++
			if b.Confirm {
				res.Confirm++
			}
		}
	}
	return res, nil
}

// fenceOf returns the line's indentation and fence characters.
func fenceOf(line string) string {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	j := i
	for j < len(line) && (line[j] == '`' || line[j] == '~') {
		j++
	}
	return line[:j]
}

// lineAt returns the byte range of 1-based line n of src.
func lineAt(src []byte, n int) (int, int) {
	start := 0
	for l := 1; l < n && start < len(src); l++ {
		i := bytes.IndexByte(src[start:], '\n')
		if i < 0 {
			return len(src), len(src)
		}
		start += i + 1
	}
	end := start
	for end < len(src) && src[end] != '\n' {
		end++
	}
	return start, end
}

func skipBlankLine(src []byte, i int) int {
	j := i
	for j < len(src) && (src[j] == ' ' || src[j] == '\t' || src[j] == '\r') {
		j++
	}
	if j < len(src) && src[j] == '\n' {
		return j + 1
	}
	return i
}

func apply(src []byte, edits []edit) []byte {
	// By position; at one position an insertion goes before a replacement.
	sort.SliceStable(edits, func(i, j int) bool {
		a, b := edits[i], edits[j]
		if a.start != b.start {
			return a.start < b.start
		}
		return a.end-a.start < b.end-b.start
	})
	var b bytes.Buffer
	pos := 0
	for _, e := range edits {
		if e.start < pos {
			continue // overlapping: the earlier edit wins
		}
		b.Write(src[pos:e.start])
		b.WriteString(e.text)
		pos = e.end
	}
	b.Write(src[pos:])
	return b.Bytes()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ErrNothing is returned by callers that refuse to write an unchanged file.
var ErrNothing = errors.New("already a Cairn runbook: nothing to change")
