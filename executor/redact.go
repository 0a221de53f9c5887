package executor

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Mask replaces redacted text.
const Mask = "••••"

// Redactor hides secret values and patterns in everything shown or stored.
type Redactor struct {
	mu       sync.RWMutex
	values   []string
	patterns []*regexp.Regexp
}

// MinSecret is the shortest secret value that can be masked: shorter ones
// would mask ordinary text. The engine refuses shorter secret parameters
// and fails a block whose secret capture is shorter, rather than show them.
const MinSecret = 3

// AddValue hides every occurrence of v (surrounding space trimmed; values
// shorter than MinSecret are the caller's to refuse). A multi-line value
// is also hidden line by line: output streams a line at a time, a block may
// print it with a prefix or reformatted (while read l; do echo "> $l"), and
// a chunk may end between two of its lines; each line long enough to mask
// is a secret of its own.
func (r *Redactor) AddValue(v string) {
	v = strings.TrimSpace(v)
	if len(v) < MinSecret {
		return
	}
	vals := []string{v}
	if strings.ContainsAny(v, "\r\n") {
		for _, l := range strings.FieldsFunc(v, func(c rune) bool { return c == '\n' || c == '\r' }) {
			if l = strings.TrimSpace(l); len(l) >= MinSecret {
				vals = append(vals, l)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range vals {
		if !slices.Contains(r.values, v) {
			r.values = append(r.values, v)
		}
	}
	// Longest first, so a value containing another is masked whole.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
}

// AddPattern hides every match of re.
func (r *Redactor) AddPattern(re *regexp.Regexp) {
	r.mu.Lock()
	r.patterns = append(r.patterns, re)
	r.mu.Unlock()
}

// longest is the length of the longest secret value.
func (r *Redactor) longest() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.values) == 0 {
		return 0
	}
	return len(r.values[0])
}

// safeCut moves cut back so that no occurrence of a secret value spans it
// (the part before cut can then be redacted and emitted on its own).
func (r *Redactor) safeCut(b []byte, cut int) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for moved := true; moved; {
		moved = false
		for _, v := range r.values {
			lo := max(0, cut-len(v)+1)
			if i := bytes.Index(b[lo:min(len(b), cut+len(v)-1)], []byte(v)); i >= 0 && lo+i < cut {
				cut, moved = lo+i, true
			}
		}
	}
	return cut
}

// String redacts s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Mask)
	}
	for _, re := range r.patterns {
		s = re.ReplaceAllString(s, Mask)
	}
	return s
}

// LineRedactor redacts a stream line by line, as block output is: a
// terminal's transcript.
type LineRedactor struct{ lr lineRedactor }

// NewLineRedactor redacts what is written with r and passes it to emit a
// line (or a long line's safe piece) at a time; Flush emits the rest.
func NewLineRedactor(r *Redactor, emit func([]byte)) *LineRedactor {
	return &LineRedactor{lineRedactor{r: r, emit: emit}}
}

func (l *LineRedactor) Write(p []byte) { l.lr.Write(p) }
func (l *LineRedactor) Flush()         { l.lr.Flush() }

// lineRedactor redacts a stream line by line, so that a secret split across
// two chunks is still caught. Lines longer than maxLine are flushed as they
// are (after redaction of what is there).
type lineRedactor struct {
	r       *Redactor
	pending []byte
	emit    func([]byte)
	onLine  func([]byte) // sees each complete chunk of lines before redaction
}

const maxLine = 64 << 10

func (lr *lineRedactor) Write(p []byte) {
	lr.pending = append(lr.pending, p...)
	i := bytes.LastIndexByte(lr.pending, '\n')
	if i < 0 && len(lr.pending) < maxLine {
		return
	}
	cut := i + 1
	if i < 0 {
		// A line longer than maxLine goes out in pieces. Keep back enough
		// for a secret that starts here and ends in the next chunk, and
		// never cut through one that is all here.
		cut = len(lr.pending) - max(lr.r.longest()-1, 0)
		cut = lr.r.safeCut(lr.pending, cut)
		if cut <= 0 {
			return
		}
	}
	if lr.onLine != nil {
		lr.onLine(lr.pending[:cut])
	}
	lr.emit([]byte(lr.r.String(string(lr.pending[:cut]))))
	lr.pending = append(lr.pending[:0], lr.pending[cut:]...)
}

func (lr *lineRedactor) Flush() {
	if len(lr.pending) > 0 {
		if lr.onLine != nil {
			lr.onLine(lr.pending)
		}
		lr.emit([]byte(lr.r.String(string(lr.pending))))
		lr.pending = lr.pending[:0]
	}
}

// jsonOutput parses output as JSON for jsonpath captures on shell blocks
// (kubectl -o json).
func jsonOutput(out string) []any {
	var v any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &v); err != nil {
		return nil
	}
	return []any{v}
}
