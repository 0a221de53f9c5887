package site

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipCache keeps each served file's gzip form until the file changes, so
// that a page is compressed once per build, not once per request: the
// biggest bundled page is 285 KB of HTML and 40 KB over the wire.
type gzipCache struct {
	mu sync.Mutex
	m  map[string]gzipped
}

type gzipped struct {
	src *byte // the bytes it was made from (a rebuild makes new ones)
	n   int
	gz  []byte
}

// minGzip is the size below which compressing gains less than it costs.
const minGzip = 1024

// compressible says whether a response of this type is worth compressing.
func compressible(contentType string) bool {
	for _, p := range []string{"text/", "application/json", "application/javascript", "image/svg+xml", "application/xml"} {
		if strings.HasPrefix(contentType, p) {
			return true
		}
	}
	return false
}

// acceptsGzip reads Accept-Encoding as browsers send it; a q=0 refuses.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		w, err := strconv.ParseFloat(q, 64)
		return err != nil || w > 0
	}
	return false
}

// get returns name's data gzipped, compressing it when it changed.
func (c *gzipCache) get(name string, data []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.m[name]; ok && g.src == &data[0] && g.n == len(data) {
		return g.gz
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	zw.Write(data)
	zw.Close()
	if c.m == nil {
		c.m = map[string]gzipped{}
	}
	c.m[name] = gzipped{src: &data[0], n: len(data), gz: buf.Bytes()}
	return buf.Bytes()
}

// write sends data as the response body, gzipped when the client takes it
// and it is worth it; the headers are set before.
func (c *gzipCache) write(w http.ResponseWriter, r *http.Request, name, contentType string, data []byte) {
	w.Header().Add("Vary", "Accept-Encoding")
	if len(data) < minGzip || !compressible(contentType) || !acceptsGzip(r) {
		w.Write(data)
		return
	}
	gz := c.get(name, data)
	w.Header().Set("Content-Encoding", "gzip")
	w.Write(gz)
}
