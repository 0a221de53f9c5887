package site

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/tdewolff/minify/v2"
	"github.com/tdewolff/minify/v2/css"
	"github.com/tdewolff/minify/v2/js"
)

// minifier minifies a theme's CSS and JavaScript as the theme is loaded:
// the page's first load carries a third less, and a theme's sources stay
// readable. Vendored files (assets/vendor/) ship minified already.
var minifier = sync.OnceValue(func() *minify.M {
	m := minify.New()
	m.Add("text/css", &css.Minifier{})
	// Version 0: the minifier may use any syntax the newest JavaScript
	// has where it is shorter; the theme targets current browsers only.
	m.Add("text/javascript", &js.Minifier{})
	return m
})

// minified caches by content: the dev server reloads a theme on every
// change of it, and the embedded theme is the same for every Builder.
var minified sync.Map // [32]byte → []byte

// minifyAsset returns data minified when name is a CSS or JS file of the
// theme's own, else data. An asset that does not parse is a theme error
// that names the file.
func minifyAsset(name string, data []byte) ([]byte, error) {
	if strings.HasPrefix(name, "vendor/") {
		return data, nil
	}
	var mediatype string
	switch path.Ext(name) {
	case ".css":
		mediatype = "text/css"
	case ".js":
		mediatype = "text/javascript"
	default:
		return data, nil
	}
	key := sha256.Sum256(append([]byte(mediatype+"\x00"), data...))
	if v, ok := minified.Load(key); ok {
		return v.([]byte), nil
	}
	var out bytes.Buffer
	out.Grow(len(data))
	if err := minifier().Minify(mediatype, &out, bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("assets/%s: minify: %w (--minify=false serves it as written)", name, err)
	}
	b := bytes.Clone(out.Bytes())
	minified.Store(key, b)
	return b, nil
}
