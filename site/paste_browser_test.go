package site_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/paste"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestBrowserPasteFillMatchesGo: the page's Copy (cairn.js fillTemplate)
// and cairn run's confirmation (paste.Template.Fill) fill every bundled
// block's template alike, hostile values, unknown captures and secrets
// included, so the table of rules has one meaning in both.
func TestBrowserPasteFillMatchesGo(t *testing.T) {
	dir := buildSite(t, filepath.Join("..", "content"))
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	open(t, ctx, srv.URL+"/practice/")
	set, err := runbook.LoadDir(filepath.Join("..", "content"))
	if err != nil {
		t.Fatal(err)
	}
	values := []string{
		"plain", "", "it's \"quoted\" $(x) `y` \\z", "line1\nline2\r\n\ttab \x01\x7f", "안녕 ✓", "42", "-1.5e3", "true",
		"cp0 root@cp1:2222, [::1]:22", "}\"]} {",
	}
	type cse struct {
		Tmpl *paste.Template   `json:"tmpl"`
		Vals map[string]string `json:"vals"`
		Want string            `json:"want"`
	}
	var cases []cse
	for _, rb := range set.Runbooks {
		for _, b := range rb.Blocks {
			tm := paste.Build(rb, b)
			if tm == nil {
				continue
			}
			for i, v := range values {
				vals := map[string]string{}
				k := 0
				for name := range tm.Vars {
					// Every third name stays unknown, in turn.
					if (k+i)%3 != 2 {
						vals[name] = v
					}
					k++
				}
				cases = append(cases, cse{tm, vals, tm.Fill(vals)})
			}
		}
	}
	js, _ := json.Marshal(cases)
	bad := eval[[]int](t, ctx, `(() => { const cs = `+string(js)+`; const bad = [];
		cs.forEach((c, i) => { if (window.Cairn.fillTemplate(c.tmpl, c.vals) !== c.want) bad.push(i); });
		return bad; })()`)
	for _, i := range bad {
		got := eval[string](t, ctx, `window.Cairn.fillTemplate(`+mustJSON(cases[i].Tmpl)+`, `+mustJSON(cases[i].Vals)+`)`)
		t.Errorf("case %d: the page fills\n%s\ncairn run fills\n%s", i, got, cases[i].Want)
		if len(bad) > 3 {
			break
		}
	}
	t.Logf("%d fills compared, %d differ", len(cases), len(bad))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
