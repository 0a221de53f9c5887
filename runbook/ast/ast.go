// Package ast defines the goldmark AST nodes that Cairn's runbook parser adds:
// containers (admonitions and tabs), steps and runbook code blocks.
package ast

import (
	"fmt"

	gast "github.com/yuin/goldmark/ast"
)

// KindContainer is the NodeKind of Container.
var KindContainer = gast.NewNodeKind("CairnContainer")

// Container is a ::: fenced container: an admonition, a tab set or a tab.
type Container struct {
	gast.BaseBlock
	Colons int    // length of the opening fence
	Name   string // note, tip, caution, warning, tabs, tab (or what the author wrote)
	Info   string // rest of the opening line: title and {attributes}
	InfoAt int    // byte offset of Info in the source
	Closed bool   // a closing fence was found

	// Set by the runbook transformer.
	Title string
	Param string // tabs: the enum parameter the tab set is bound to
	Value string // tab: the parameter value the tab stands for
	Group int    // tabs/tab: ordinal of the tab set in the runbook, for stable DOM ids
}

// Kind implements gast.Node.
func (n *Container) Kind() gast.NodeKind { return KindContainer }

// Dump implements gast.Node.
func (n *Container) Dump(source []byte, level int) {
	gast.DumpHelper(n, source, level, map[string]string{"Name": n.Name, "Info": n.Info}, nil)
}

// IsRaw implements gast.Node: containers hold block children.
func (n *Container) IsRaw() bool { return false }

// KindStep is the NodeKind of Step.
var KindStep = gast.NewNodeKind("CairnStep")

// Step replaces a level-2 heading: the start of a runbook step. Its children
// are the heading's inline content without the {attributes}.
type Step struct {
	gast.BaseBlock
	Index int // into runbook.Runbook.Steps
}

// Kind implements gast.Node.
func (n *Step) Kind() gast.NodeKind { return KindStep }

// Dump implements gast.Node.
func (n *Step) Dump(source []byte, level int) {
	gast.DumpHelper(n, source, level, map[string]string{"Index": fmt.Sprint(n.Index)}, nil)
}

// KindCodeBlock is the NodeKind of CodeBlock.
var KindCodeBlock = gast.NewNodeKind("CairnCodeBlock")

// CodeBlock replaces every fenced code block; Index points at its
// runbook.Block, which holds the parsed attributes.
type CodeBlock struct {
	gast.BaseBlock
	Index int
}

// Kind implements gast.Node.
func (n *CodeBlock) Kind() gast.NodeKind { return KindCodeBlock }

// IsRaw implements gast.Node: the lines are code, not Markdown.
func (n *CodeBlock) IsRaw() bool { return true }

// Dump implements gast.Node.
func (n *CodeBlock) Dump(source []byte, level int) {
	gast.DumpHelper(n, source, level, map[string]string{"Index": fmt.Sprint(n.Index)}, nil)
}
