package site

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/runbook"
)

// ConfigFile is the site configuration cairn build and serve read from the
// current folder when it exists (--config names another).
const ConfigFile = "cairn.yaml"

// Config is a site's settings; command-line flags override each.
type Config struct {
	Title   string `yaml:"title"`    // site title (default "Cairn")
	BaseURL string `yaml:"base_url"` // public URL, for sitemap.xml
	EditURL string `yaml:"edit_url"` // "edit this page" link with {path}
	// Lang is the language of runbooks whose front matter names none
	// (ko or en; default en).
	Lang string `yaml:"lang"`
	// RawHTML is what pages do with raw HTML in runbooks: "omit" (the
	// default, as goldmark and Hugo do) or "render" (Hugo's unsafe: only
	// for content you trust, since a page carries Run buttons and the
	// pairing token).
	RawHTML string `yaml:"raw_html"`
}

// Raw HTML policies.
const (
	RawHTMLOmit   = "omit"
	RawHTMLRender = "render"
)

// Warnings are the parse warnings that hold for a site with this raw-HTML
// policy: where raw HTML is rendered, the warning that a page omits it is
// not.
func Warnings(ws runbook.Diagnostics, rawHTML string) runbook.Diagnostics {
	var out runbook.Diagnostics
	for _, w := range ws {
		if w.Code == runbook.CodeRawHTML && rawHTML == RawHTMLRender {
			continue
		}
		out = append(out, w)
	}
	return out
}

// LoadConfig reads path. Unknown keys and bad values are errors with the
// file and line, since a typo in a site setting silently changing nothing
// is worse than a stopped build.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return c, fmt.Errorf("%s: %v (known keys: title, base_url, edit_url, lang, raw_html)", path, yamlMsg(err))
	}
	var line = func(key string) int {
		var doc yaml.Node
		if yaml.Unmarshal(b, &doc) == nil && len(doc.Content) > 0 {
			m := doc.Content[0]
			for i := 0; i+1 < len(m.Content); i += 2 {
				if m.Content[i].Value == key {
					return m.Content[i+1].Line
				}
			}
		}
		return 0
	}
	switch c.Lang {
	case "", "ko", "en":
	default:
		return c, fmt.Errorf("%s:%d: lang %q: use ko or en", path, line("lang"), c.Lang)
	}
	switch c.RawHTML {
	case "", RawHTMLOmit, RawHTMLRender:
	default:
		return c, fmt.Errorf("%s:%d: raw_html %q: use omit or render", path, line("raw_html"), c.RawHTML)
	}
	return c, nil
}

func yamlMsg(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return te.Errors[0]
	}
	return err.Error()
}
