package site_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/site"
)

// TestUpdateMatchesBuild checks that what Update returns for a change is
// what a full build of the changed content returns, for the files that
// Update reuses or assembles from cached parts: the index, the 404 page and
// the search index.
func TestUpdateMatchesBuild(t *testing.T) {
	dir := t.TempDir()
	write := func(name, tags, body string) string {
		p := filepath.Join(dir, name)
		src := "---\ntitle: " + strings.TrimSuffix(name, ".md") + "\ntags: [" + tags + "]\n---\n\n## First {#first}\n\n" + body + "\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("alpha.md", "one", "Alpha body.")
	write("beta.md", "two", "Beta body.")
	b, err := site.New(site.Options{Content: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.Build(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, tags, body string }{
		{"body only", "one", "Alpha body, edited."},
		{"a tag, shown on the index", "one, three", "Alpha body, edited."},
		{"body again", "one, three", "Alpha body, edited twice."},
	} {
		write("alpha.md", c.tags, c.body)
		got, err := b.Update(ctx, []string{a})
		if err != nil {
			t.Fatal(err)
		}
		want := build(t, dir)
		if !got.SearchDeferred {
			t.Errorf("%s: an update assembled the search index instead of deferring it", c.what)
		}
		got.Files["search.json"], got.Files["search.js"] = b.SearchFiles()
		for _, name := range []string{"index.html", "404.html", "search.json", "search.js", "alpha/index.html"} {
			if !bytes.Equal(got.Files[name], want.Files[name]) {
				t.Errorf("%s: Update's %s differs from a full build's", c.what, name)
			}
		}
	}
}

// TestUpdateKeepsWhatDidNotMove edits runbooks of a site with a compact
// navigation (more than NavInlineMax runbooks) one way after another and
// checks, after each, that every file the dev server would now hold (the
// files it had, overlaid with Update's) is the full build's; an update that
// moved nothing re-renders only the changed page and leaves the site-wide
// files (nav.js, the sitemap) as they were.
func TestUpdateKeepsWhatDidNotMove(t *testing.T) {
	dir := t.TempDir()
	write := func(name, title, tags, body string) string {
		p := filepath.Join(dir, name)
		src := "---\ntitle: " + title + "\ntags: [" + tags + "]\n---\n\n## First {#first}\n\n" + body + "\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i := range site.NavInlineMax + 5 {
		write(fmt.Sprintf("r%03d.md", i), fmt.Sprintf("Runbook %03d", i), "t", "Body.")
	}
	b, err := site.New(site.Options{Content: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := b.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := first.Files
	for _, c := range []struct {
		what, file, title, tags, body string
		moved                         bool
	}{
		{"body only", "r007.md", "Runbook 007", "t", "Body, edited.", false},
		{"body again, another file", "r030.md", "Runbook 030", "t", "Other body.", false},
		{"a tag", "r007.md", "Runbook 007", "t, u", "Body, edited.", true},
		{"a title that moves it", "r030.md", "Runbook 999", "t", "Other body.", true},
		{"body after the move", "r030.md", "Runbook 999", "t", "Other body, edited.", false},
		{"a new runbook", "r100.md", "Runbook 100", "t", "New.", true},
	} {
		p := write(c.file, c.title, c.tags, c.body)
		got, err := b.Update(ctx, []string{p})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Files["sitemap.xml"]; ok && !c.moved {
			t.Errorf("%s: an update that moved nothing made the sitemap again", c.what)
		}
		if got.Rendered != 1 && !c.moved {
			t.Errorf("%s: rendered %d pages, want 1", c.what, got.Rendered)
		}
		for k, v := range got.Files {
			held[k] = v
		}
		held["search.json"], held["search.js"] = b.SearchFiles()
		want := build(t, dir)
		for name, data := range want.Files {
			if !bytes.Equal(held[name], data) {
				t.Errorf("%s: the served %s differs from a full build's", c.what, name)
			}
		}
	}
}
