package site_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/site"
)

// TestDialects builds a folder of Markdown shaped like what teams already
// have (a GitHub README, a Runme notebook, a Hugo page with shortcodes, an
// mkdocs page, an empty runbook): warnings only, one page per file.
func TestDialects(t *testing.T) {
	files, _ := filepath.Glob("testdata/dialects/*.md")
	build := func(opts site.Options) *site.Result {
		t.Helper()
		opts.Content = "testdata/dialects"
		b, err := site.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Build(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Diagnostics) > 0 {
			t.Fatalf("errors:\n%v", res.Diagnostics)
		}
		if len(res.Runbooks) != len(files) {
			t.Errorf("%d pages for %d files", len(res.Runbooks), len(files))
		}
		return res
	}
	res := build(site.Options{})
	var warns []string
	for _, w := range res.Warnings {
		warns = append(warns, w.String())
	}
	all := strings.Join(warns, "\n")
	for _, want := range []string{
		"readme.md:1: warning: no front matter",
		"readme.md:8:1: warning: raw HTML is not shown",
		`runme.md:2:1: warning: front matter: unknown key "runme"`,
		`runme.md:10:7: warning: Runme attribute "interactive" is ignored`,
		`runme.md:14:20: warning: Runme attribute "background" is ignored`,
		"runme.md:1: warning: front matter has no title",
		`hugo.md:4:1: warning: front matter: unknown key "draft"`,
		`mkdocs.md:15:12: warning: words after the language ("$ kubectl get pods") are ignored`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings lack %q:\n%s", want, all)
		}
	}
	page := func(res *site.Result, slug string) string { return string(res.Files[slug+"/index.html"]) }
	for slug, want := range map[string]string{
		"readme": `<h1 class="rb-title">Deploy the demo app</h1>`,
		"runme":  `<h1 class="rb-title">Runme notebook</h1>`,
		"hugo":   `<span class="cb-title">kubeadm-config.yaml</span>`,
		"mkdocs": `<h1 class="rb-title">Backups</h1>`,
		"empty":  `<h1 class="rb-title">Coming soon</h1>`,
	} {
		if !strings.Contains(page(res, slug), want) {
			t.Errorf("%s page lacks %s", slug, want)
		}
	}
	if !strings.Contains(page(res, "hugo"), "1 step\n") || strings.Contains(page(res, "hugo"), "1 steps") {
		t.Error(`a one-step page does not say "1 step"`)
	}
	if strings.Contains(page(res, "readme"), "<details>") {
		t.Error("raw HTML rendered by default")
	}
	if !strings.Contains(page(res, "readme"), "cb-indented") {
		t.Error("the indented code block is not framed")
	}
	if strings.Count(page(res, "mkdocs"), `class="step"`) != 0 {
		t.Error("a ## in a list item became a step")
	}

	// raw_html: render (cairn.yaml) lets it through and drops the warning;
	// lang gives the runbooks without one their language.
	res = build(site.Options{RawHTML: site.RawHTMLRender, Lang: "ko"})
	if !strings.Contains(page(res, "readme"), "<details>") {
		t.Error("raw_html: render did not render <details>")
	}
	for _, w := range res.Warnings {
		if w.Code == runbook.CodeRawHTML {
			t.Errorf("raw-HTML warning with raw_html: render: %s", w)
		}
	}
	for _, rb := range res.Runbooks {
		if rb.Meta.Lang != "ko" {
			t.Errorf("%s: lang %s with the site's ko", rb.Path, rb.Meta.Lang)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "cairn.yaml")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := site.LoadConfig(write("title: Ops docs\nbase_url: https://docs.example.org/\nlang: ko\nraw_html: render\n"))
	if err != nil || c.Title != "Ops docs" || c.Lang != "ko" || c.RawHTML != "render" || c.BaseURL != "https://docs.example.org/" {
		t.Errorf("%+v %v", c, err)
	}
	if _, err := site.LoadConfig(write("")); err != nil {
		t.Errorf("empty file: %v", err)
	}
	for src, want := range map[string]string{
		"title: x\nunsafe: true\n": `line 2: field unsafe not found`,
		"raw_html: yes\n":          `cairn.yaml:1: raw_html "yes": use omit or render`,
		"lang: fr\n":               `cairn.yaml:1: lang "fr": use ko or en`,
	} {
		if _, err := site.LoadConfig(write(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}
