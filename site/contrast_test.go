package site_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestBrowserCodeContrast renders every bundled runbook in Chromium, in the
// light and the dark theme and with a dark system setting and no choice
// made, and checks every highlighted token (each chroma class that occurs:
// YAML colons, JSON brackets, comments, strings ...) against the code
// block's background: WCAG AA, a contrast ratio of at least 4.5.
func TestBrowserCodeContrast(t *testing.T) {
	dir := buildSite(t, filepath.Join("..", "content"))
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	pages, _ := filepath.Glob(filepath.Join(dir, "*", "index.html"))
	// Computed colours of every token span against its <pre>'s background.
	const probe = `(function () {
  function rgb(s) { var m = s.match(/[\d.]+/g).map(Number); return m; }
  function lum(c) { return [0, 1, 2].map(function (i) { var v = c[i] / 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
    .reduce(function (a, v, i) { return a + v * [0.2126, 0.7152, 0.0722][i]; }, 0); }
  var worst = {}, classes = {};
  document.querySelectorAll(".cb pre code span[class], .cb pre code").forEach(function (s) {
    if (s.classList.contains("ln") || s.classList.contains("prm") || !s.textContent.trim()) return;
    var pre = s.closest("pre");
    var fg = rgb(getComputedStyle(s).color), bg = rgb(getComputedStyle(pre).backgroundColor);
    var a = lum(fg), b = lum(bg), r = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    var cls = s.className || "plain";
    classes[cls] = true;
    if (!(cls in worst) || r < worst[cls].r) worst[cls] = { r: r, fg: getComputedStyle(s).color, bg: getComputedStyle(pre).backgroundColor, text: s.textContent.slice(0, 20) };
  });
  return JSON.stringify(worst);
})()`
	seen := map[string]bool{}
	for _, theme := range []string{"light", "dark", "system-dark"} {
		for _, p := range pages {
			rel, _ := filepath.Rel(dir, filepath.Dir(p))
			if theme == "system-dark" {
				emulateDark(t, ctx, true)
			}
			open(t, ctx, srv.URL+"/"+filepath.ToSlash(rel)+"/")
			switch theme {
			case "light", "dark":
				eval[string](t, ctx, fmt.Sprintf(`(document.documentElement.setAttribute("data-theme", %q), "")`, theme))
			case "system-dark":
				eval[string](t, ctx, `(document.documentElement.removeAttribute("data-theme"), "")`)
			}
			worst := eval[map[string]any](t, ctx, "JSON.parse("+probe+")")
			for cls, v := range worst {
				m := v.(map[string]any)
				seen[cls] = true
				if r := m["r"].(float64); r < 4.5 {
					t.Errorf("%s, %s theme: token class %q (%q) has contrast %.2f (%s on %s), want ≥ 4.5", rel, theme, cls, m["text"], r, m["fg"], m["bg"])
				}
			}
			if theme == "system-dark" {
				emulateDark(t, ctx, false)
			}
		}
	}
	// The bundled runbooks exercise the classes the issue named.
	for _, cls := range []string{"p", "c1", "s2", "nt"} {
		if !seen[cls] {
			t.Errorf("no token of class %q checked (classes seen: %s)", cls, strings.Join(keys(seen), " "))
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// emulateDark sets (or clears) a dark system colour scheme.
func emulateDark(t *testing.T, ctx context.Context, on bool) {
	t.Helper()
	p := emulation.SetEmulatedMediaParams{}
	if on {
		p.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, p); err != nil {
		t.Fatal(err)
	}
}
