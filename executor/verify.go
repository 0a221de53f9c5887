package executor

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/runbook"
)

// ObjectChecker evaluates JSONPath over the objects a kube action returned.
// The kube runner package implements it; the engine only needs this much.
type ObjectChecker interface {
	CheckJSONPath(objects []any, c runbook.JSONPathCheck) (ok bool, reason string)
	EvalJSONPath(objects []any, path string) ([]string, error)
}

// blockCapturer is an ObjectChecker that evaluates captures with the
// block's own semantics (kube.Checker).
type blockCapturer interface {
	CaptureJSONPath(b *runbook.Block, objects []any, path string) (string, error)
}

// Verdict is the outcome of checking a run against the block's expectations.
type Verdict struct {
	OK      bool
	Reasons []string // why it failed, one per failed expectation, in words
}

// Verify checks every expectation of b against the results and the combined
// output. Output of several hosts is checked per host.
func Verify(b *runbook.Block, hosts []HostResult, outputs map[string]string, oc ObjectChecker) Verdict {
	v := Verdict{OK: true}
	fail := func(format string, args ...any) {
		v.OK = false
		v.Reasons = append(v.Reasons, fmt.Sprintf(format, args...))
	}
	if len(hosts) == 0 {
		fail("nothing ran")
		return v
	}
	e := b.Expect
	for _, h := range hosts {
		where := ""
		if len(hosts) > 1 || b.Target.Fans() {
			where = h.Host + ": "
		}
		if h.Err != nil {
			fail("%s%v", where, h.Err)
			continue
		}
		if !e.AnyExit && h.Exit != e.Exit {
			hint := ""
			if cmd := runbook.ReadsStdin(b); cmd != "" {
				hint = fmt.Sprintf(" (the block runs %s, which waits for input, and blocks have no standard input)", cmd)
			}
			fail("%sexpected exit status %d, got %d%s", where, e.Exit, h.Exit, hint)
		}
		out := outputs[h.Host]
		for _, s := range e.Contains {
			if !strings.Contains(out, s) {
				fail("%soutput does not contain %q", where, s)
			}
		}
		for _, s := range e.NotContains {
			if strings.Contains(out, s) {
				fail("%soutput contains %q", where, s)
			}
		}
		for _, re := range e.Match {
			if !re.MatchString(out) {
				fail("%soutput does not match /%s/", where, strings.TrimPrefix(re.String(), "(?m)"))
			}
		}
		for _, sim := range e.Similar {
			if ok, why := Similar(sim.Content, out); !ok {
				fail("%soutput is not similar to the expected output (line %d of it): %s", where, sim.BodyPos.Line, why)
			}
		}
		if e.Lease != nil {
			if ok, why := CheckLease(h.Before, h.Objects, e.Lease, time.Now()); !ok {
				fail("%s%s", where, why)
			}
		}
		if len(e.JSONPath) > 0 || e.Count >= 0 {
			if e.Count >= 0 && len(h.Objects) != e.Count {
				fail("%sexpected %d objects, found %d", where, e.Count, len(h.Objects))
			}
			for _, jc := range e.JSONPath {
				if oc == nil {
					fail("%scannot check %s: no JSONPath support configured", where, jc.Path)
					continue
				}
				if ok, why := oc.CheckJSONPath(h.Objects, jc); !ok {
					fail("%s%s", where, why)
				}
			}
		}
	}
	return v
}

// similarLine is one compiled line of an expected-output template.
type similarLine struct {
	anyLines bool // a "..." line: any number of lines
	re       *regexp.Regexp
	text     string
}

// compileSimilar compiles a template's lines (runbook.ParseSimilar) to
// RE2, one expression per line.
func compileSimilar(tmpl string) []similarLine {
	var out []similarLine
	for _, l := range runbook.ParseSimilar(tmpl) {
		if l.AnyLines {
			out = append(out, similarLine{anyLines: true, text: l.Text})
			continue
		}
		var b strings.Builder
		// RE2's \s has no \v: the set is spelled out (runbook.SimilarSpace).
		const sp = `[\t\n\v\f\r ]`
		b.WriteString(`^` + sp + `*`)
		for _, tk := range l.Tokens {
			switch tk.Kind {
			case runbook.SimAny:
				b.WriteString(`.*`)
			case runbook.SimSpace:
				b.WriteString(sp + `+`)
			case runbook.SimWord:
				b.WriteString(`[^\t\n\v\f\r ]+`)
			default:
				b.WriteString(quoteBytes(tk.Text))
			}
		}
		b.WriteString(sp + `*$`)
		out = append(out, similarLine{re: regexp.MustCompile(b.String()), text: l.Text})
	}
	return out
}

// quoteBytes quotes text for RE2 as QuoteMeta does, with each byte that
// is not UTF-8 written as U+FFFD, which is what RE2 reads such a byte of
// the output as (a template is matched byte for byte, as the script's awk
// does in the C locale).
func quoteBytes(text string) string {
	var b strings.Builder
	for len(text) > 0 {
		r, n := utf8.DecodeRuneInString(text)
		if r == utf8.RuneError && n == 1 {
			b.WriteString(`\x{FFFD}`)
		} else {
			b.WriteString(regexp.QuoteMeta(text[:n]))
		}
		text = text[n:]
	}
	return b.String()
}

// Similar reports whether output matches an "output is similar to" template:
// lines match in order (blank lines ignored), <placeholder> matches a run of
// non-space characters, a "..." line matches any number of lines, "..."
// inside a line matches any text, and runs of white space compare equal.
// Output lines not covered by the template are allowed only where a "..."
// line stands, or before the first and after the last template line.
func Similar(tmpl, output string) (bool, string) {
	pat := compileSimilar(tmpl)
	var lines []string
	for _, l := range strings.Split(output, "\n") {
		if !runbook.SimilarBlank(l) {
			lines = append(lines, l)
		}
	}
	// Anchor loosely: the template may start anywhere in the output, since
	// commands often print progress first.
	for start := 0; start <= len(lines); start++ {
		if matchFrom(pat, lines[start:]) {
			return true, ""
		}
	}
	// Report the first template line that no output line matches.
	for _, p := range pat {
		if p.anyLines {
			continue
		}
		found := false
		for _, l := range lines {
			if p.re.MatchString(l) {
				found = true
				break
			}
		}
		if !found {
			return false, fmt.Sprintf("no output line looks like %q", p.text)
		}
	}
	return false, "the expected lines appear, but not in this order"
}

func matchFrom(pat []similarLine, lines []string) bool {
	if len(pat) == 0 {
		return true
	}
	p := pat[0]
	if p.anyLines {
		for i := 0; i <= len(lines); i++ {
			if matchFrom(pat[1:], lines[i:]) {
				return true
			}
		}
		return false
	}
	if len(lines) == 0 || !p.re.MatchString(lines[0]) {
		return false
	}
	return matchFrom(pat[1:], lines[1:])
}

// Capture extracts the block's captures from output (and kube objects).
func Capture(b *runbook.Block, out string, objects []any, oc ObjectChecker) (map[string]string, []string) {
	vals := map[string]string{}
	var missing []string
	for _, c := range b.Captures {
		switch {
		case c.Regexp != nil:
			m := c.Regexp.FindStringSubmatch(out)
			if m == nil {
				missing = append(missing, fmt.Sprintf("capture %s: /%s/ did not match the output", c.Name, strings.TrimPrefix(c.Regexp.String(), "(?m)")))
				continue
			}
			v := m[0]
			if len(m) > 1 {
				v = m[1]
			}
			vals[c.Name] = strings.TrimSpace(v)
		case c.JSONPath != "":
			var got []string
			var err error
			if cc, ok := oc.(blockCapturer); ok && objects != nil {
				// Evaluated as the block's own jsonpath= would be: on the
				// object, or on the list a list-get returned.
				var v string
				if v, err = cc.CaptureJSONPath(b, objects, c.JSONPath); err == nil && v != "" {
					got = []string{v}
				}
			} else if oc != nil && objects != nil {
				got, err = oc.EvalJSONPath(objects, c.JSONPath)
			} else if oc != nil {
				got, err = oc.EvalJSONPath(jsonOutput(out), c.JSONPath)
			} else {
				err = fmt.Errorf("no JSONPath support configured")
			}
			if err != nil || len(got) == 0 {
				missing = append(missing, fmt.Sprintf("capture %s: %s found nothing%s", c.Name, c.JSONPath, errSuffix(err)))
				continue
			}
			vals[c.Name] = strings.Join(got, " ")
		}
	}
	return vals, missing
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// Lease is what expect.lease reads of a coordination.k8s.io Lease.
type Lease struct {
	Name     string
	Holder   string
	Renew    time.Time
	Duration time.Duration
}

// LeaseOf reads a Lease object (unstructured JSON); ok is false when obj
// is not one.
func LeaseOf(obj any) (Lease, bool) {
	m, _ := obj.(map[string]any)
	spec, _ := m["spec"].(map[string]any)
	md, _ := m["metadata"].(map[string]any)
	if spec == nil || md == nil {
		return Lease{}, false
	}
	l := Lease{Duration: 15 * time.Second}
	l.Name, _ = md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		l.Name = ns + "/" + l.Name
	}
	l.Holder, _ = spec["holderIdentity"].(string)
	if s, _ := spec["renewTime"].(string); s != "" {
		l.Renew, _ = time.Parse(time.RFC3339Nano, s)
	}
	switch d := spec["leaseDurationSeconds"].(type) {
	case float64:
		l.Duration = time.Duration(d) * time.Second
	case int64:
		l.Duration = time.Duration(d) * time.Second
	case int:
		l.Duration = time.Duration(d) * time.Second
	}
	return l, true
}

// CheckLease is expect.lease: the Lease (after, one object) is held by a
// holder matching holder, has not expired at now (renewTime +
// leaseDurationSeconds), and, when before is given, was renewed between
// the two reads. A holder that exited leaves a Lease that names it: only
// the renewal tells a live holder from a dead one.
func CheckLease(before, after []any, holder *regexp.Regexp, now time.Time) (bool, string) {
	if len(after) != 1 {
		return false, fmt.Sprintf("expect.lease: expected one Lease, found %d objects", len(after))
	}
	l, ok := LeaseOf(after[0])
	if !ok {
		return false, "expect.lease: the object is not a Lease"
	}
	switch {
	case l.Holder == "":
		return false, fmt.Sprintf("lease %s has no holder", l.Name)
	case !holder.MatchString(l.Holder):
		return false, fmt.Sprintf("lease %s is held by %q, want a holder matching /%s/", l.Name, l.Holder, holder.String())
	case l.Renew.IsZero():
		return false, fmt.Sprintf("lease %s (holder %q) has no renewTime", l.Name, l.Holder)
	case now.Sub(l.Renew) > l.Duration:
		return false, fmt.Sprintf("lease %s: holder %q stopped renewing: last renewal %s, expired %s ago", l.Name, l.Holder,
			l.Renew.UTC().Format(time.RFC3339), now.Sub(l.Renew.Add(l.Duration)).Round(time.Second))
	}
	if len(before) == 1 {
		if b, ok := LeaseOf(before[0]); ok && b.Holder == l.Holder && !l.Renew.After(b.Renew) {
			return false, fmt.Sprintf("lease %s: holder %q did not renew while watched (renewTime stayed %s)", l.Name, l.Holder, l.Renew.UTC().Format(time.RFC3339Nano))
		}
	}
	return true, ""
}
