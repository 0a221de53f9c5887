package runbook

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Cond is a parsed `when` condition.
type Cond struct {
	Src  string
	root condNode
}

// Eval evaluates the condition with the given parameter values.
func (c *Cond) Eval(values map[string]string) bool {
	if c == nil {
		return true
	}
	return c.root.eval(values)
}

// Names returns the parameter names the condition reads, in order of first use.
func (c *Cond) Names() []string {
	if c == nil {
		return nil
	}
	var out []string
	c.root.walk(func(n condNode) {
		if v, ok := n.(condVar); ok && !contains(out, string(v)) {
			out = append(out, string(v))
		}
	})
	return out
}

// Comparisons returns every `NAME op "literal"` in the condition.
func (c *Cond) Comparisons() [][2]string {
	if c == nil {
		return nil
	}
	var out [][2]string
	c.root.walk(func(n condNode) {
		if cmp, ok := n.(condCmp); ok {
			if v, ok := cmp.l.(condVar); ok {
				if s, ok := cmp.r.(condStr); ok {
					out = append(out, [2]string{string(v), string(s)})
				}
			}
			if v, ok := cmp.r.(condVar); ok {
				if s, ok := cmp.l.(condStr); ok {
					out = append(out, [2]string{string(v), string(s)})
				}
			}
		}
	})
	return out
}

// And joins conditions; nil operands are dropped.
func And(cs ...*Cond) *Cond {
	var parts []*Cond
	for _, c := range cs {
		if c != nil {
			parts = append(parts, c)
		}
	}
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out = &Cond{Src: "(" + out.Src + ") && (" + p.Src + ")", root: condAnd{out.root, p.root}}
	}
	return out
}

// Shell returns the condition as a bash `[[ ]]`-free test expression over
// environment variables, for exported scripts.
func (c *Cond) Shell() string {
	if c == nil {
		return "true"
	}
	return c.root.shell()
}

type condNode interface {
	eval(map[string]string) bool
	str(map[string]string) string
	walk(func(condNode))
	shell() string
}

type (
	condVar string
	condStr string
	condNot struct{ x condNode }
	condAnd struct{ l, r condNode }
	condOr  struct{ l, r condNode }
	condCmp struct {
		op   string
		l, r condNode
	}
)

func (v condVar) eval(m map[string]string) bool  { return m[string(v)] == "true" }
func (v condVar) str(m map[string]string) string { return m[string(v)] }
func (v condVar) walk(f func(condNode))          { f(v) }
func (v condVar) shell() string                  { return fmt.Sprintf(`[ "${%s:-}" = true ]`, string(v)) }
func (s condStr) eval(map[string]string) bool    { return s != "" }
func (s condStr) str(map[string]string) string   { return string(s) }
func (s condStr) walk(f func(condNode))          { f(s) }
func (s condStr) shell() string                  { return "false" }
func (n condNot) eval(m map[string]string) bool  { return !n.x.eval(m) }
func (n condNot) str(m map[string]string) string { return boolStr(n.eval(m)) }
func (n condNot) walk(f func(condNode))          { f(n); n.x.walk(f) }
func (n condNot) shell() string                  { return "! { " + n.x.shell() + "; }" }
func (a condAnd) eval(m map[string]string) bool  { return a.l.eval(m) && a.r.eval(m) }
func (a condAnd) str(m map[string]string) string { return boolStr(a.eval(m)) }
func (a condAnd) walk(f func(condNode))          { f(a); a.l.walk(f); a.r.walk(f) }
func (a condAnd) shell() string                  { return "{ " + a.l.shell() + " && " + a.r.shell() + "; }" }
func (o condOr) eval(m map[string]string) bool   { return o.l.eval(m) || o.r.eval(m) }
func (o condOr) str(m map[string]string) string  { return boolStr(o.eval(m)) }
func (o condOr) walk(f func(condNode))           { f(o); o.l.walk(f); o.r.walk(f) }
func (o condOr) shell() string                   { return "{ " + o.l.shell() + " || " + o.r.shell() + "; }" }
func (c condCmp) eval(m map[string]string) bool {
	eq := c.l.str(m) == c.r.str(m)
	if c.op == "==" {
		return eq
	}
	return !eq
}
func (c condCmp) str(m map[string]string) string { return boolStr(c.eval(m)) }
func (c condCmp) walk(f func(condNode))          { f(c); c.l.walk(f); c.r.walk(f) }
func (c condCmp) shell() string {
	op := "="
	if c.op == "!=" {
		op = "!="
	}
	return fmt.Sprintf("[ %s %s %s ]", shellOperand(c.l), op, shellOperand(c.r))
}

func shellOperand(n condNode) string {
	switch v := n.(type) {
	case condVar:
		return fmt.Sprintf(`"${%s:-}"`, string(v))
	case condStr:
		return ShellQuote(string(v))
	default:
		return `"$( ` + n.shell() + ` && echo true || echo false )"`
	}
}

// ShellQuote quotes s for bash as one word, literally.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PlainWord reports whether s reads as one bash word without quotes: not
// empty, and only letters, digits and @%+=:,./_-.
func PlainWord(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			return false
		}
	}
	return s != ""
}

// ShellWord is s as a reader would type it: as it is when plain, else
// single-quoted.
func ShellWord(s string) string {
	if PlainWord(s) {
		return s
	}
	return ShellQuote(s)
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// CondError is a syntax error at a byte offset of the condition text.
type CondError struct {
	Off int
	Msg string
}

func (e *CondError) Error() string { return e.Msg }

// ParseCond parses a condition:
//
//	expr := or ; or := and ('||' and)* ; and := unary ('&&' unary)*
//	unary := '!' unary | primary ; primary := '(' expr ')' | operand (('=='|'!=') operand)?
//	operand := NAME | "string" | 'string'
func ParseCond(src string) (*Cond, error) {
	p := &condParser{src: src}
	p.next()
	if p.tok.kind == tEOF {
		return nil, &CondError{0, "condition is empty"}
	}
	n, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errTok()
	}
	return &Cond{Src: src, root: n}, nil
}

// maxCondDepth bounds nesting so hostile input cannot exhaust the stack.
const maxCondDepth = 64

type tokKind int

const (
	tEOF tokKind = iota
	tName
	tStr
	tOp
	tErr
)

type token struct {
	kind tokKind
	text string
	off  int
}

type condParser struct {
	src string
	i   int
	tok token
}

func (p *condParser) next() {
	for p.i < len(p.src) && (p.src[p.i] == ' ' || p.src[p.i] == '\t') {
		p.i++
	}
	start := p.i
	if p.i >= len(p.src) {
		p.tok = token{tEOF, "", start}
		return
	}
	c := p.src[p.i]
	switch {
	case isNameStart(c):
		for p.i < len(p.src) && (isNameStart(p.src[p.i]) || p.src[p.i] >= '0' && p.src[p.i] <= '9') {
			p.i++
		}
		p.tok = token{tName, p.src[start:p.i], start}
	case c == '"' || c == '\'':
		j := strings.IndexByte(p.src[p.i+1:], c)
		if j < 0 {
			p.tok = token{tErr, "unterminated string in condition", start}
			p.i = len(p.src)
			return
		}
		p.tok = token{tStr, p.src[p.i+1 : p.i+1+j], start}
		p.i += j + 2
	default:
		for _, op := range []string{"==", "!=", "&&", "||", "!", "(", ")"} {
			if strings.HasPrefix(p.src[p.i:], op) {
				p.i += len(op)
				p.tok = token{tOp, op, start}
				return
			}
		}
		if c == '=' {
			p.tok = token{tErr, "use '==' to compare, not '='", start}
		} else {
			p.tok = token{tErr, fmt.Sprintf("unexpected %q in condition", c), start}
		}
		p.i = len(p.src)
	}
}

func (p *condParser) errTok() error {
	switch p.tok.kind {
	case tErr:
		return &CondError{p.tok.off, p.tok.text}
	case tEOF:
		return &CondError{p.tok.off, "condition ends too early"}
	}
	return &CondError{p.tok.off, fmt.Sprintf("unexpected %q in condition", p.tok.text)}
}

func (p *condParser) or(depth int) (condNode, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tOp && p.tok.text == "||" {
		p.next()
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = condOr{l, r}
	}
	return l, nil
}

func (p *condParser) and(depth int) (condNode, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tOp && p.tok.text == "&&" {
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = condAnd{l, r}
	}
	return l, nil
}

func (p *condParser) unary(depth int) (condNode, error) {
	if depth > maxCondDepth {
		return nil, &CondError{p.tok.off, "condition nests too deeply"}
	}
	if p.tok.kind == tOp && p.tok.text == "!" {
		p.next()
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return condNot{x}, nil
	}
	if p.tok.kind == tOp && p.tok.text == "(" {
		p.next()
		x, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tOp || p.tok.text != ")" {
			if p.tok.kind == tEOF {
				return nil, &CondError{p.tok.off, "missing ')' in condition"}
			}
			return nil, p.errTok()
		}
		p.next()
		return x, nil
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tOp && (p.tok.text == "==" || p.tok.text == "!=") {
		op := p.tok.text
		p.next()
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		return condCmp{op, l, r}, nil
	}
	if _, ok := l.(condStr); ok {
		return nil, &CondError{p.tok.off, "a string alone is not a condition; compare it with a parameter"}
	}
	return l, nil
}

func (p *condParser) operand() (condNode, error) {
	switch p.tok.kind {
	case tName:
		n := condVar(p.tok.text)
		p.next()
		return n, nil
	case tStr:
		n := condStr(p.tok.text)
		p.next()
		return n, nil
	}
	return nil, p.errTok()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MarshalJSON encodes the condition as a tree the page script evaluates:
// {"var":"X"}, {"str":"a"}, {"op":"==","l":…,"r":…}, {"op":"!","x":…}.
func (c *Cond) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	return json.Marshal(condJSON(c.root))
}

func condJSON(n condNode) map[string]any {
	switch v := n.(type) {
	case condVar:
		return map[string]any{"var": string(v)}
	case condStr:
		return map[string]any{"str": string(v)}
	case condNot:
		return map[string]any{"op": "!", "x": condJSON(v.x)}
	case condAnd:
		return map[string]any{"op": "&&", "l": condJSON(v.l), "r": condJSON(v.r)}
	case condOr:
		return map[string]any{"op": "||", "l": condJSON(v.l), "r": condJSON(v.r)}
	case condCmp:
		return map[string]any{"op": v.op, "l": condJSON(v.l), "r": condJSON(v.r)}
	}
	return nil
}
