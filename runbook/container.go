package runbook

import (
	"bytes"

	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	rbast "github.com/cairn-dev/cairn/runbook/ast"
)

// containerParser parses ::: fenced containers (admonitions and tabs).
type containerParser struct{}

func (containerParser) Trigger() []byte { return []byte{':'} }

func (containerParser) Open(parent gastNode, reader text.Reader, pc parser.Context) (gastNode, parser.State) {
	line, seg := reader.PeekLine()
	pos := pc.BlockOffset()
	if pos < 0 {
		return nil, parser.NoChildren
	}
	i := pos
	for i < len(line) && line[i] == ':' {
		i++
	}
	colons := i - pos
	if colons < 3 {
		return nil, parser.NoChildren
	}
	rest := line[i:]
	left := util.TrimLeftSpaceLength(rest)
	body := util.TrimRightSpace(rest[left:])
	if len(body) == 0 || !isNameStart(body[0]) {
		// A bare ::: line outside any container is just text.
		return nil, parser.NoChildren
	}
	k := 0
	for k < len(body) && (isNameByte(body[k])) {
		k++
	}
	kind := string(body[:k])
	info := bytes.TrimLeft(body[k:], " \t")
	infoAt := seg.Start + i + left + (len(body) - len(info))
	node := &rbast.Container{Colons: colons, Name: kind, Info: string(info), InfoAt: infoAt}
	reader.AdvanceToEOL()
	return node, parser.HasChildren
}

func (containerParser) Continue(node gastNode, reader text.Reader, pc parser.Context) parser.State {
	c := node.(*rbast.Container)
	line, _ := reader.PeekLine()
	w, pos := util.IndentWidth(line, reader.LineOffset())
	if w < 4 {
		i := pos
		for i < len(line) && line[i] == ':' {
			i++
		}
		if i-pos >= c.Colons && util.IsBlank(line[i:]) {
			c.Closed = true
			reader.AdvanceToEOL()
			return parser.Close
		}
	}
	return parser.Continue | parser.HasChildren
}

func (containerParser) Close(gastNode, text.Reader, parser.Context) {}
func (containerParser) CanInterruptParagraph() bool                 { return true }
func (containerParser) CanAcceptIndentedLine() bool                 { return false }
