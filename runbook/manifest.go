package runbook

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Manifest is a kube block's body (an apply manifest or a patch document)
// whose ${NAME} references have been located inside the YAML/JSON it is.
//
// Parameters are data: the body is parsed once with every reference replaced
// by an inert placeholder, so its structure (documents, keys, kinds, names)
// is fixed by the text the author wrote, and Fill only ever puts a value
// inside the string scalar that held the reference. A value with newlines,
// quotes or "---" stays one string; it can never add a key, an object or a
// document. Rendering the filled documents back to text never happens: the
// kube runner sends Fill's JSON as is.
type Manifest struct {
	src   string
	nonce string
	refs  []ManifestRef // by placeholder index
	docs  []any         // decoded JSON values holding placeholders
}

// ManifestRef is one ${NAME} of a manifest.
type ManifestRef struct {
	Name string
	Line int    // 1-based line in the body
	Doc  int    // 1-based document
	Path string // where it landed: metadata.name, spec.containers[0].image, or "" when it vanished (a comment)
	Key  bool   // it is (part of) a mapping key
	// Plain means the scalar is exactly this reference, unquoted: its value
	// may be a number or a boolean (maskSize: ${SIZE}). Quoted, or with
	// other text around it, a value is always a string.
	Plain bool
}

// ParseManifest locates the ${NAME} references of a kube body and parses it
// as YAML (or JSON) documents. Errors name the line.
func ParseManifest(body string) (*Manifest, error) {
	m, _, err := parseManifest(body, false)
	return m, err
}

// parseManifest is ParseManifest; nodes makes the YAML node tree decide
// every reference's plain-ness (the text decides where it can otherwise),
// and nodesOK says whether that tree was read to the end.
func parseManifest(body string, nodes bool) (m *Manifest, nodesOK bool, err error) {
	var nb [6]byte
	_, _ = rand.Read(nb[:])
	m = &Manifest{src: body, nonce: "cairnref" + hex.EncodeToString(nb[:])}
	refs := FindRefs(body, true)
	var sb strings.Builder
	last := 0
	for i, r := range refs {
		sb.WriteString(body[last:r.Start])
		sb.WriteString(m.placeholder(i))
		last = r.End
		m.refs = append(m.refs, ManifestRef{Name: r.Name, Line: 1 + strings.Count(body[:r.Start], "\n")})
	}
	sb.WriteString(body[last:])
	text := sb.String()

	plain, nodesOK := m.plainRefs(body, text, refs, nodes)

	rd := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for n := 1; ; n++ {
		chunk, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, fmt.Errorf("manifest document %d: %w", n, err)
		}
		v, err := yamlToJSONValue(chunk)
		if err != nil {
			return nil, false, fmt.Errorf("manifest document %d: %s", n, m.unplace(err.Error()))
		}
		if v == nil {
			continue
		}
		if obj, ok := v.(map[string]any); ok && len(obj) == 0 {
			continue
		}
		m.docs = append(m.docs, v)
		if len(refs) > 0 {
			m.locate(v, len(m.docs), "", plain)
		}
	}
	return m, nodesOK, nil
}

// plainRefs finds the references that are whole plain scalars (whose
// value may be a number or a boolean). Plain-ness is lost in the decoded
// JSON, so it comes from the text around each reference when that decides
// it, and from the YAML node tree when it does not (or when nodes is set,
// for tests); ok is false when the node decode stopped early (a YAML 1.2
// quirk: the Kubernetes decoder has the last word on the manifest).
func (m *Manifest) plainRefs(body, text string, refs []Ref, nodes bool) (plain map[int]bool, ok bool) {
	if !nodes {
		plain = map[int]bool{}
		for i, r := range refs {
			p, sure := plainByText(body, r)
			if !sure && mayBePlain(body, refs[i:i+1]) {
				nodes = true
				break
			}
			if p {
				plain[i] = true
			}
		}
		if !nodes {
			return plain, true
		}
	}
	plain = map[int]bool{}
	dec := yaml3.NewDecoder(strings.NewReader(text))
	for {
		var n yaml3.Node
		if err := dec.Decode(&n); err != nil {
			return plain, errors.Is(err, io.EOF)
		}
		m.walkNodes(&n, plain)
	}
}

// plainByText decides from the text before a reference whether its scalar,
// if the scalar turns out to be exactly the reference (the only case in
// which Plain is asked), is plain. Such a scalar is plain after a mapping's
// ':', a flow '[', '{' or ',', a complex key's '?' or a sequence's "- ";
// quoted when a quote touches it. Anything else (the reference starts its
// line: a plain value on the next line, or a block scalar's text; a tag or
// an anchor before it) is not sure, and the node tree decides.
func plainByText(body string, r Ref) (plain, sure bool) {
	i := r.Start
	for i > 0 && (body[i-1] == ' ' || body[i-1] == '\t') {
		i--
	}
	if i == 0 {
		return false, false
	}
	switch c := body[i-1]; c {
	case '"', '\'':
		return false, i == r.Start
	case ':', '[', '{', ',', '?':
		return true, true
	case '-':
		if i < r.Start && (i == 1 || strings.IndexByte(" \t\n", body[i-2]) >= 0) {
			return true, true
		}
	}
	return false, false
}

// mayBePlain reports whether a reference of body could be a whole plain
// scalar: a YAML plain scalar is set off by white space, a flow indicator
// or the ':' of a JSON-style key on both sides, so a reference with a
// quote, a letter or a '/' against it is part of a longer or quoted one.
func mayBePlain(body string, refs []Ref) bool {
	for _, r := range refs {
		before, after := byte(' '), byte(' ')
		if r.Start > 0 {
			before = body[r.Start-1]
		}
		if r.End < len(body) {
			after = body[r.End]
		}
		if strings.IndexByte(" \t\r\n[{,:", before) >= 0 && strings.IndexByte(" \t\r\n]},#", after) >= 0 {
			return true
		}
	}
	return false
}

func (m *Manifest) placeholder(i int) string { return m.nonce + "x" + strconv.Itoa(i) + "y" }

var placeholderRe = regexp.MustCompile(`cairnref[0-9a-f]{12}x([0-9]+)y`)

// unplace turns placeholders in a message back into ${NAME}.
func (m *Manifest) unplace(s string) string {
	return m.replace(s, func(_ int, r ManifestRef) string { return "${" + r.Name + "}" })
}

func (m *Manifest) index(p string) int {
	sub := placeholderRe.FindStringSubmatch(p)
	if sub == nil || !strings.HasPrefix(p, m.nonce) {
		return -1
	}
	i, err := strconv.Atoi(sub[1])
	if err != nil || i >= len(m.refs) {
		return -1
	}
	return i
}

func (m *Manifest) walkNodes(n *yaml3.Node, plain map[int]bool) {
	if n.Kind == yaml3.ScalarNode && n.Style == 0 {
		if i := m.index(n.Value); i >= 0 && m.placeholder(i) == n.Value {
			plain[i] = true
		}
	}
	for _, c := range n.Content {
		m.walkNodes(c, plain)
	}
}

// locate records where each placeholder landed in document doc.
func (m *Manifest) locate(v any, doc int, path string, plain map[int]bool) {
	mark := func(s string, key bool, path string) {
		for _, loc := range placeholderRe.FindAllStringIndex(s, -1) {
			i := m.index(s[loc[0]:loc[1]])
			if i < 0 {
				continue
			}
			r := &m.refs[i]
			r.Doc, r.Path, r.Key = doc, path, key
			r.Plain = !key && plain[i] && s == m.placeholder(i)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			mark(k, true, m.unplace(p))
			m.locate(c, doc, p, plain)
		}
	case []any:
		for i, c := range x {
			m.locate(c, doc, fmt.Sprintf("%s[%d]", path, i), plain)
		}
	case string:
		mark(x, false, path)
	}
}

// Source is the body the manifest was parsed from.
func (m *Manifest) Source() string { return m.src }

// Refs returns the manifest's references in the order they appear.
func (m *Manifest) Refs() []ManifestRef { return append([]ManifestRef(nil), m.refs...) }

// Docs is the number of documents (kind: List counts as one).
func (m *Manifest) Docs() int { return len(m.docs) }

// Fill returns the documents with values filled in, as a stream of JSON
// documents, one per line. A reference whose name has no value is left as
// ${NAME}. A plain whole-scalar reference becomes a number or a boolean when
// its value reads as one (the way YAML would read it); every other value is
// a string. It is an error for filled keys to collide.
func (m *Manifest) Fill(values map[string]string) ([]byte, error) {
	text := func(s string) string {
		return m.replace(s, func(_ int, r ManifestRef) string {
			if v, ok := values[r.Name]; ok {
				return v
			}
			return "${" + r.Name + "}"
		})
	}
	return m.encode(text, func(s string) any {
		if i := m.index(s); i >= 0 && s == m.placeholder(i) && m.refs[i].Plain {
			if val, ok := values[m.refs[i].Name]; ok {
				return TypedScalar(val)
			}
		}
		return text(s)
	})
}

// replace rewrites each placeholder in s with to(i, ref).
func (m *Manifest) replace(s string, to func(int, ManifestRef) string) string {
	if !strings.Contains(s, m.nonce) {
		return s
	}
	return placeholderRe.ReplaceAllStringFunc(s, func(p string) string {
		if i := m.index(p); i >= 0 {
			return to(i, m.refs[i])
		}
		return p
	})
}

// encode writes the documents as JSON lines, every key passed through key
// and every string value through scalar.
func (m *Manifest) encode(key func(string) string, scalar func(string) any) ([]byte, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	for n, d := range m.docs {
		v, err := rewrite(d, key, scalar)
		if err == nil {
			err = enc.Encode(v)
		}
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", n+1, err)
		}
	}
	return out.Bytes(), nil
}

// rewrite copies a decoded JSON value with its keys and strings rewritten;
// keys that come out equal are an error.
func rewrite(v any, key func(string) string, scalar func(string) any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c, err := rewrite(x[k], key, scalar)
			if err != nil {
				return nil, err
			}
			fk := key(k)
			if _, dup := out[fk]; dup {
				return nil, fmt.Errorf("key %q appears twice once values are filled in", fk)
			}
			out[fk] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			f, err := rewrite(c, key, scalar)
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	case string:
		return scalar(x), nil
	}
	return v, nil
}

var (
	intRe   = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,17})$`)
	floatRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
)

// TypedScalar is what a plain YAML scalar holding exactly v means: a number
// for a decimal number, a boolean for true or false, otherwise the string.
// Nothing else (no null, no mapping, no list) can come out of a value. The
// exported scripts' runtime applies the same rule.
func TypedScalar(v string) any {
	switch {
	case v == "true":
		return true
	case v == "false":
		return false
	case intRe.MatchString(v), floatRe.MatchString(v):
		return json.Number(v)
	}
	return v
}

// Template returns the documents as JSON with each reference as the
// placeholder returned by ph(i, ref), for the script exporter. A plain
// whole-scalar reference is written as the bare placeholder string's JSON
// encoding either way; callers know it by ref.Plain.
func (m *Manifest) Template(ph func(i int, r ManifestRef) string) ([]byte, error) {
	text := func(s string) string { return m.replace(s, ph) }
	return m.encode(text, func(s string) any { return text(s) })
}

// yamlToJSONValue reads one YAML document the way the Kubernetes decoder
// does (sigs.k8s.io/yaml's YAMLToJSON: YAML 1.1, keys made strings) and
// returns what decoding that JSON with UseNumber would: maps, slices,
// strings, booleans, nil and json.Numbers, without writing and reading the
// JSON text in between. Tests hold it to the round trip.
func yamlToJSONValue(doc []byte) (any, error) {
	var y any
	if err := yaml2.Unmarshal(doc, &y); err != nil {
		return nil, err
	}
	return jsonValue(y)
}

func jsonValue(y any) (any, error) {
	switch x := y.(type) {
	case nil, bool:
		return x, nil
	case string:
		return jsonString(x), nil
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case float64:
		b, err := json.Marshal(x) // its number format; NaN and ±Inf are errors
		if err != nil {
			return nil, err
		}
		return json.Number(b), nil
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			v, err := jsonValue(c)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			var ks string
			switch kt := k.(type) {
			case string:
				ks = jsonString(kt)
			case int:
				ks = strconv.Itoa(kt)
			case int64:
				ks = strconv.FormatInt(kt, 10)
			case float64:
				ks = strconv.FormatFloat(kt, 'g', -1, 32)
				switch ks {
				case "+Inf":
					ks = ".inf"
				case "-Inf":
					ks = "-.inf"
				case "NaN":
					ks = ".nan"
				}
			case bool:
				ks = strconv.FormatBool(kt)
			default:
				return nil, fmt.Errorf("unsupported map key of type: %T, key: %+#v, value: %+#v", k, k, c)
			}
			v, err := jsonValue(c)
			if err != nil {
				return nil, err
			}
			out[ks] = v
		}
		return out, nil
	}
	// Anything else YAML may hand back: through JSON, as before.
	b, err := json.Marshal(y)
	if err != nil {
		return nil, err
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	err = d.Decode(&v)
	return v, err
}

// jsonString is s as a JSON round trip leaves it: invalid UTF-8 (a
// "\xff" escape in a double-quoted scalar) becomes U+FFFD.
func jsonString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}
