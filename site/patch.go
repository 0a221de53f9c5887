package site

import (
	"bytes"
	"regexp"
	"strings"

	"golang.org/x/net/html"
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

func splitPage(page []byte) *pageCut {
	c := &pageCut{src: page}
	z := html.NewTokenizer(bytes.NewReader(page))
	var (
		off       int
		inContent bool
		depth     int  // element depth below the content element
		stepDepth = -1 // depth of the step section being walked, or -1
		partStart = -1 // offset of the part being read, or -1
		partDepth int
		inData    bool
		found     bool
	)
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		raw := z.Raw()
		start, end := off, off+len(raw)
		off = end
		var name []byte
		hasAttr := false
		if tt != html.TextToken && tt != html.CommentToken && tt != html.DoctypeToken {
			name, hasAttr = z.TagName()
		}
		// Attributes are read only where they decide something: the
		// content, the article and the page data outside it, a step in it.
		var class, id string
		if hasAttr && (tt == html.StartTagToken || tt == html.SelfClosingTagToken) && partStart < 0 &&
			((!inContent && (string(name) == "div" || string(name) == "article" || string(name) == "script")) ||
				(inContent && depth == 0 && string(name) == "section")) {
			for {
				k, v, more := z.TagAttr()
				switch string(k) {
				case "class":
					class = string(v)
				case "id":
					id = string(v)
				}
				if !more {
					break
				}
			}
		}
		tag := ""
		if partStart < 0 {
			tag = string(name)
		}
		if !inContent {
			switch {
			case tt == html.StartTagToken && tag == "div" && hasClass(class, "rb-content"):
				inContent, depth, found = true, 0, true
			case tt == html.StartTagToken && tag == "article" && hasClass(class, "runbook"):
				if m := hashAttr.FindSubmatchIndex(raw); m != nil {
					c.hash = string(raw[m[2]:m[3]])
					c.skeleton = append(c.skeleton, raw[:m[2]]...)
					c.skeleton = append(c.skeleton, raw[m[3]:]...)
					continue
				}
			case tt == html.StartTagToken && tag == "script" && id == "cairn-data":
				inData = true
			case tt == html.TextToken && inData:
				c.data = string(z.Text())
				continue
			case tt == html.EndTagToken && tag == "script":
				inData = false
			}
			c.skeleton = append(c.skeleton, raw...)
			continue
		}
		opens := tt == html.StartTagToken && !voidTags[string(name)]
		closes := tt == html.EndTagToken
		// A part starts at an element directly in the content, or directly
		// in a step; a step itself is not a part.
		partLevel := depth == 0 || (stepDepth >= 0 && depth == stepDepth+1)
		if partStart < 0 && partLevel && (tt == html.StartTagToken || tt == html.SelfClosingTagToken) {
			if depth == 0 && tag == "section" && hasClass(class, "step") {
				stepDepth = depth
				depth++
				c.skeleton = append(c.skeleton, raw...)
				continue
			}
			if !opens {
				c.parts = append(c.parts, page[start:end])
				c.skeleton = append(c.skeleton, 0)
				continue
			}
			partStart, partDepth = start, depth
			depth++
			continue
		}
		if opens {
			depth++
		}
		if closes {
			depth--
			if depth < 0 { // the content's end
				inContent = false
				c.skeleton = append(c.skeleton, raw...)
				continue
			}
			if partStart >= 0 && depth == partDepth {
				c.parts = append(c.parts, page[partStart:end])
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
