package site

import (
	"bytes"
	"html"
	"regexp"
	"strings"
)

// PagePatch is what an open runbook page needs to show an edit that
// changed only prose: the new HTML of the parts that changed, by their
// place in the page's list of parts (the runbook content's top-level
// elements, a step's elements in place of the step), the runbook's new
// hash and page data. The dev server works it out from the page it served
// and the page it made, so the page neither fetches nor parses itself
// again (live.js applies it; a page whose hash is not Base fetches).
type PagePatch struct {
	Base  string      `json:"base"` // the data-hash of the page it applies to
	Hash  string      `json:"hash"`
	N     int         `json:"n"` // how many parts the page has
	Data  string      `json:"data"`
	Parts []PatchPart `json:"parts"`
}

// PatchPart is one part's new outer HTML.
type PatchPart struct {
	I    int    `json:"i"`
	HTML string `json:"html"`
}

// DiffPage returns the patch that turns the runbook page old into new, or
// why there is none: a part added, removed or moved, a change outside the
// content (title, navigation, a step's heading or attributes), or a changed
// part that the page's scripts bring to life (code blocks, tabs, conditions,
// parameters, controls). The rules are live.js's, which checks a fetched
// page the same way.
func DiffPage(old, new []byte) (*PagePatch, string) {
	return diffCuts(splitPage(old), splitPage(new))
}

func diffCuts(a, b *pageCut) (*PagePatch, string) {
	switch {
	case a == nil || b == nil:
		return nil, "not a runbook page"
	case len(a.parts) != len(b.parts):
		return nil, "parts added, removed or moved"
	case !bytes.Equal(a.skeleton, b.skeleton):
		return nil, "outside the content"
	}
	p := &PagePatch{Base: a.hash, Hash: b.hash, N: len(b.parts), Data: b.data, Parts: []PatchPart{}}
	for i := range b.parts {
		if bytes.Equal(a.parts[i], b.parts[i]) {
			continue
		}
		if livePart(a.parts[i]) || livePart(b.parts[i]) {
			return nil, "a live part"
		}
		p.Parts = append(p.Parts, PatchPart{I: i, HTML: string(b.parts[i])})
	}
	return p, ""
}

// splitPage is a page cut into its parts and the rest (the skeleton, with
// a mark where each part was and the runbook's hash and page data left
// out, since they change with every edit).
type pageCut struct {
	src        []byte // the page
	skeleton   []byte
	parts      [][]byte
	hash, data string
}

var hashAttr = regexp.MustCompile(`\sdata-hash="([^"]*)"`)

// voidTags have no end tag.
var voidTags = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}

// A token is one piece of a page as an HTML tokenizer cuts it: its kind,
// its bytes, and for a tag its lower-case name.
type token struct {
	kind       tokenKind
	start, end int
	name       string
}

type tokenKind int

const (
	textToken tokenKind = iota
	startTagToken
	endTagToken
	selfClosingTagToken
	otherToken // a comment, a doctype, a processing instruction
)

// tokenizer yields a page's tokens in order; attr reads an attribute of
// the last start tag.
type tokenizer interface {
	next() (token, bool)
	attr(key string) string
}

func splitPage(page []byte) *pageCut { return cutPage(page, newScanner(page)) }

func cutPage(page []byte, z tokenizer) *pageCut {
	c := &pageCut{src: page}
	var (
		inContent bool
		depth     int  // element depth below the content element
		stepDepth = -1 // depth of the step section being walked, or -1
		partStart = -1 // offset of the part being read, or -1
		partDepth int
		inData    bool
		found     bool
	)
	for {
		tk, ok := z.next()
		if !ok {
			break
		}
		raw := page[tk.start:tk.end]
		isStart := tk.kind == startTagToken || tk.kind == selfClosingTagToken
		if !inContent {
			switch {
			case isStart && tk.name == "div" && hasClass(z.attr("class"), "rb-content"):
				inContent, depth, found = true, 0, true
			case isStart && tk.name == "article" && hasClass(z.attr("class"), "runbook"):
				if m := hashAttr.FindSubmatchIndex(raw); m != nil {
					c.hash = string(raw[m[2]:m[3]])
					c.skeleton = append(c.skeleton, raw[:m[2]]...)
					c.skeleton = append(c.skeleton, raw[m[3]:]...)
					continue
				}
			case tk.kind == startTagToken && tk.name == "script" && z.attr("id") == "cairn-data":
				inData = true
			case tk.kind == textToken && inData:
				c.data = string(raw)
				continue
			case tk.kind == endTagToken && tk.name == "script":
				inData = false
			}
			c.skeleton = append(c.skeleton, raw...)
			continue
		}
		opens := tk.kind == startTagToken && !voidTags[tk.name]
		// A part starts at an element directly in the content, or directly
		// in a step; a step itself is not a part.
		partLevel := depth == 0 || (stepDepth >= 0 && depth == stepDepth+1)
		if partStart < 0 && partLevel && isStart {
			if depth == 0 && tk.name == "section" && hasClass(z.attr("class"), "step") {
				stepDepth = depth
				depth++
				c.skeleton = append(c.skeleton, raw...)
				continue
			}
			if !opens {
				c.parts = append(c.parts, raw)
				c.skeleton = append(c.skeleton, 0)
				continue
			}
			partStart, partDepth = tk.start, depth
			depth++
			continue
		}
		if opens {
			depth++
		}
		if tk.kind == endTagToken {
			depth--
			if depth < 0 { // the content's end
				inContent = false
				c.skeleton = append(c.skeleton, raw...)
				continue
			}
			if partStart >= 0 && depth == partDepth {
				c.parts = append(c.parts, page[partStart:tk.end])
				c.skeleton = append(c.skeleton, 0)
				partStart = -1
				continue
			}
			if stepDepth >= 0 && depth == stepDepth {
				stepDepth = -1
				c.skeleton = append(c.skeleton, raw...)
				continue
			}
		}
		if partStart < 0 {
			c.skeleton = append(c.skeleton, raw...)
		}
	}
	if !found || inContent || partStart >= 0 {
		return nil
	}
	return c
}

// scanner is a small HTML tokenizer for the pages Cairn renders: tags with
// quoted or bare attribute values, comments and doctypes, and the raw text
// of script, style and the like, up to their end tag. It is several times
// quicker than golang.org/x/net/html's (no copies, no attribute parsing but
// where asked), which it matches on such pages (FuzzScannerMatchesHTML);
// where a page of other HTML confuses it, the browser's count of parts
// differs and the page fetches itself instead.
type scanner struct {
	page     []byte
	pos      int
	lastTag  [2]int // the bytes of the last start tag's attributes
	rawUntil string // the end tag that ends raw text after the last start tag
}

func newScanner(page []byte) *scanner { return &scanner{page: page} }

// rawText are the elements whose content is text up to their end tag.
var rawText = map[string]bool{"script": true, "style": true, "textarea": true, "title": true, "xmp": true,
	"iframe": true, "noembed": true, "noframes": true, "noscript": true, "plaintext": true}

func (s *scanner) next() (token, bool) {
	p, n := s.page, len(s.page)
	start := s.pos
	if start >= n {
		return token{}, false
	}
	if s.rawUntil != "" {
		name := s.rawUntil
		s.rawUntil = ""
		end := n
		if name != "plaintext" {
			for i := start; i < n; i++ {
				if p[i] == '<' && i+2+len(name) <= n && p[i+1] == '/' && bytes.EqualFold(p[i+2:i+2+len(name)], []byte(name)) &&
					(i+2+len(name) == n || isTagEnd(p[i+2+len(name)])) {
					end = i
					break
				}
			}
		}
		if end > start {
			s.pos = end
			return token{kind: textToken, start: start, end: end}, true
		}
	}
	if p[start] != '<' || start+1 >= n {
		return s.text(start), true
	}
	c := p[start+1]
	switch {
	case c == '!' || c == '?':
		if bytes.HasPrefix(p[start:], []byte("<!--")) {
			end := bytes.Index(p[start+4:], []byte("-->"))
			if end < 0 {
				s.pos = n
			} else {
				s.pos = start + 4 + end + 3
			}
		} else {
			end := bytes.IndexByte(p[start:], '>')
			if end < 0 {
				s.pos = n
			} else {
				s.pos = start + end + 1
			}
		}
		return token{kind: otherToken, start: start, end: s.pos}, true
	case c == '/' && start+2 < n && isLetter(p[start+2]):
		i := start + 2
		for i < n && !isTagEnd(p[i]) {
			i++
		}
		name := tagName(p[start+2 : i])
		end := bytes.IndexByte(p[i:], '>')
		if end < 0 {
			s.pos = n
		} else {
			s.pos = i + end + 1
		}
		return token{kind: endTagToken, start: start, end: s.pos, name: name}, true
	case isLetter(c):
		i := start + 1
		for i < n && !isTagEnd(p[i]) {
			i++
		}
		name := tagName(p[start+1 : i])
		attrs := i
		// The tag ends at the first '>' outside a quoted value.
		var quote byte
		for ; i < n; i++ {
			switch ch := p[i]; {
			case quote != 0:
				if ch == quote {
					quote = 0
				}
			case ch == '"' || ch == '\'':
				if lastNonSpace(p, attrs, i) == '=' {
					quote = ch
				}
			case ch == '>':
				s.pos = i + 1
				s.lastTag = [2]int{attrs, i}
				kind := startTagToken
				if p[i-1] == '/' && i-1 >= attrs {
					kind = selfClosingTagToken
				}
				if kind == startTagToken && rawText[name] {
					s.rawUntil = name
				}
				return token{kind: kind, start: start, end: s.pos, name: name}, true
			}
		}
		s.pos = n
		return token{kind: otherToken, start: start, end: n}, true
	}
	return s.text(start), true
}

// text is the text from start to the next '<' that can begin a tag.
func (s *scanner) text(start int) token {
	p, n := s.page, len(s.page)
	i := start + 1
	for i < n {
		j := bytes.IndexByte(p[i:], '<')
		if j < 0 {
			i = n
			break
		}
		i += j
		if i+1 < n && (isLetter(p[i+1]) || p[i+1] == '!' || p[i+1] == '?' || (p[i+1] == '/' && i+2 < n && isLetter(p[i+2]))) {
			break
		}
		i++
	}
	s.pos = i
	return token{kind: textToken, start: start, end: i}
}

// attr is the last start tag's attribute key (the first of that name),
// its character references decoded.
func (s *scanner) attr(key string) string {
	a := s.page[s.lastTag[0]:s.lastTag[1]]
	for i := 0; i < len(a); {
		for i < len(a) && (isSpace(a[i]) || a[i] == '/') {
			i++
		}
		k := i
		for i < len(a) && !isSpace(a[i]) && a[i] != '=' && a[i] != '/' {
			i++
		}
		name := a[k:i]
		for i < len(a) && isSpace(a[i]) {
			i++
		}
		val := []byte(nil)
		if i < len(a) && a[i] == '=' {
			i++
			for i < len(a) && isSpace(a[i]) {
				i++
			}
			if i < len(a) && (a[i] == '"' || a[i] == '\'') {
				q := a[i]
				e := bytes.IndexByte(a[i+1:], q)
				if e < 0 {
					val, i = a[i+1:], len(a)
				} else {
					val, i = a[i+1:i+1+e], i+1+e+1
				}
			} else {
				v := i
				for i < len(a) && !isSpace(a[i]) {
					i++
				}
				val = a[v:i]
			}
		}
		if len(name) > 0 && bytes.EqualFold(name, []byte(key)) {
			return html.UnescapeString(string(val))
		}
		if len(name) == 0 {
			i++
		}
	}
	return ""
}

// knownTags are the names Cairn's pages use, so that reading them does not
// allocate.
var knownTags = func() map[string]string {
	m := map[string]string{}
	for _, n := range strings.Fields("a abbr article aside b blockquote br button code dd del details div dl dt em " +
		"footer form h1 h2 h3 h4 h5 h6 header hr i img input kbd label li main nav ol option p path pre s script " +
		"section select span strong style sub summary sup svg table tbody td textarea th thead title tr ul circle ellipse") {
		m[n] = n
	}
	return m
}()

func tagName(b []byte) string {
	if n, ok := knownTags[string(b)]; ok {
		return n
	}
	return strings.ToLower(string(b))
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isSpace(c byte) bool  { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
func isTagEnd(c byte) bool { return isSpace(c) || c == '/' || c == '>' }

// lastNonSpace is the last byte before i (from from on) that is not white
// space, or 0.
func lastNonSpace(p []byte, from, i int) byte {
	for j := i - 1; j >= from; j-- {
		if !isSpace(p[j]) {
			return p[j]
		}
	}
	return 0
}

func hasClass(class, want string) bool {
	for _, f := range strings.Fields(class) {
		if f == want {
			return true
		}
	}
	return false
}

// liveClasses and liveTags mark what the page's scripts bring to life
// (live.js's LIVE selector).
var (
	liveClasses = []string{"cb", "tabs", "prm", "step-title"}
	liveTags    = []string{"<form", "<input", "<button", "<select", "<textarea", "<script", "<dialog"}
	classAttr   = regexp.MustCompile(`\sclass="([^"]*)"`)
)

func livePart(part []byte) bool {
	s := string(part)
	if strings.Contains(s, "data-when") {
		return true
	}
	for _, t := range liveTags {
		if strings.Contains(s, t) {
			return true
		}
	}
	for _, m := range classAttr.FindAllStringSubmatch(s, -1) {
		for _, c := range liveClasses {
			if hasClass(m[1], c) {
				return true
			}
		}
	}
	return false
}
