package paste

import (
	"regexp"
	"testing"
)

// FuzzMarkers: markers finds what the expression it replaces finds.
func FuzzMarkers(f *testing.F) {
	for _, s := range []string{`{"a":"\u0001X\u0002","b":"x\u0001Y_1\u0003y"}`, `"\u0001X\u0003"`, `\u0001\u0002 \u0001a\u0002 "\u0001AB\u0002`,
		`""\u0001X\u0002"" \u0001X\u0001Y\u0002`} {
		f.Add(s)
	}
	re := regexp.MustCompile(`"\\u0001([A-Z][A-Z0-9_]*)\\u0002"|\\u0001([A-Z][A-Z0-9_]*)\\u000[23]`)
	f.Fuzz(func(t *testing.T, js string) {
		want := re.FindAllStringSubmatchIndex(js, -1)
		got := markers(js)
		if len(got) != len(want) {
			t.Fatalf("%q: %d markers, the expression finds %d", js, len(got), len(want))
		}
		for i, m := range want {
			name, whole := "", m[2] >= 0
			if whole {
				name = js[m[2]:m[3]]
			} else {
				name = js[m[4]:m[5]]
			}
			if g := got[i]; g.start != m[0] || g.end != m[1] || g.name != name || g.whole != whole {
				t.Fatalf("%q: marker %d = %+v, the expression's %v", js, i, g, m)
			}
		}
	})
}
