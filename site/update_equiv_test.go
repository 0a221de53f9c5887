package site_test

import (
	"bytes"
	"context"
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
