package site_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cairn-dev/cairn/site"
	"github.com/cairn-dev/cairn/themes"
)

// The dev server sends text gzipped to a browser that takes it, the same
// bytes as plain, and plain to a client that does not (or refuses, q=0);
// small files go plain.
func TestServeCompresses(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.md"), runbookMD("가", "## 하나 {#one}\n\n"+strings.Repeat("긴 문단이에요. ", 400)+"\n"))
	base, _ := devServer(t, dir)
	// A transport that leaves the encoding alone, as a browser's network
	// layer shows it.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(path, accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	for _, path := range []string{"a/", "assets/cairn.js", "assets/cairn.css"} {
		plain, body := get(path, "")
		if plain.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s without Accept-Encoding: Content-Encoding %q", path, plain.Header.Get("Content-Encoding"))
		}
		for _, accept := range []string{"gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8"} {
			resp, gz := get(path, accept)
			if resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
				t.Errorf("%s (Accept-Encoding %s): Content-Encoding %q, Vary %q", path, accept, resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
				continue
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("%s: the gzipped body is not the plain one (%v)", path, err)
			}
			if len(gz) > len(body)/2 {
				t.Errorf("%s: %d bytes gzipped of %d", path, len(gz), len(body))
			}
		}
		if resp, _ := get(path, "gzip;q=0, identity"); resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: gzip sent to a client that refused it (q=0)", path)
		}
	}
	// After an edit the page is compressed anew, not the old one resent.
	writeFile(t, filepath.Join(dir, "a.md"), runbookMD("가", "## 하나 {#one}\n\n"+strings.Repeat("고친 문단이에요. ", 400)+"\n"))
	for range 100 {
		_, body := get("a/", "")
		if bytes.Contains(body, []byte("고친 문단이에요.")) {
			resp, gz := get("a/", "gzip")
			zr, _ := gzip.NewReader(bytes.NewReader(gz))
			got, _ := io.ReadAll(zr)
			if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(got, body) {
				t.Error("after an edit, the gzipped page is not the new page")
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Error("the edit never showed")
}

// The theme's own CSS and JS are minified in the output, vendored files are
// left as shipped, and --minify=false (NoMinify) writes them as written.
func TestThemeMinified(t *testing.T) {
	build := func(noMinify bool) map[string][]byte {
		t.Helper()
		b, err := site.New(site.Options{Content: filepath.Join("..", "content"), NoMinify: noMinify})
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Build(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res.Files
	}
	min, raw := build(false), build(true)
	for _, name := range []string{"cairn.js", "executor.js", "terminal.js", "cairn.css"} {
		src, err := fs.ReadFile(themes.Default(), "assets/"+name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw["assets/"+name], src) {
			t.Errorf("NoMinify: assets/%s differs from the theme's", name)
		}
		if m := min["assets/"+name]; len(m) == 0 || len(m) > len(src)*9/10 {
			t.Errorf("assets/%s: %d bytes minified of %d", name, len(m), len(src))
		}
	}
	if len(min["assets/chroma.css"]) >= len(raw["assets/chroma.css"]) {
		t.Error("chroma.css is not minified")
	}
	if !bytes.Equal(min["assets/vendor/xterm/xterm.js"], raw["assets/vendor/xterm/xterm.js"]) {
		t.Error("the vendored xterm.js was changed")
	}
}

// A theme script that does not parse fails the build, naming the file and
// the way to ship it as written.
func TestMinifyErrorNamesFile(t *testing.T) {
	theme := fstest.MapFS{}
	err := fs.WalkDir(themes.Default(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(themes.Default(), p)
		theme[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	theme["assets/broken.js"] = &fstest.MapFile{Data: []byte("function ( {")}
	_, err = site.New(site.Options{Content: filepath.Join("..", "content"), Theme: theme})
	if err == nil || !strings.Contains(err.Error(), "assets/broken.js") || !strings.Contains(err.Error(), "--minify=false") {
		t.Errorf("err = %v, want one naming assets/broken.js and --minify=false", err)
	}
	if _, err := site.New(site.Options{Content: filepath.Join("..", "content"), Theme: theme, NoMinify: true}); err != nil {
		t.Errorf("NoMinify: %v", err)
	}
}
