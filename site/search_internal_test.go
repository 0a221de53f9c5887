package site

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzSearchText: the streaming text of a search entry is what joining the
// fields of all of it and clipping gave.
func FuzzSearchText(f *testing.F) {
	f.Add("a  b\tc\n", "  d\u00a0e\u3000f ", strings.Repeat("가나 ", 700))
	f.Add(strings.Repeat("x", 1999), " y", "z")
	f.Add(strings.Repeat("x", 1998)+"\u00e9", "\xff\xfe ", "")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var st searchText
		st.WriteString(a)
		st.Write([]byte(b))
		st.WriteByte(' ')
		st.WriteString(c)
		want := clip(strings.Join(strings.Fields(a+b+" "+c), " "), maxSearchText)
		if got := clip(string(st.b), maxSearchText); got != want {
			t.Fatalf("got %q\nwant %q", got, want)
		}
	})
}

// TestSearchTextRandom runs FuzzSearchText's check on random strings made of
// the pieces that matter: ASCII and Unicode spaces, multi-byte letters,
// invalid bytes, around the clip length.
func TestSearchTextRandom(t *testing.T) {
	pieces := []string{" ", "\t", "\n", "\u00a0", "\u3000", "\u2028", "가", "é", "x", "ab", "\xff", "\xe2\x80"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var parts [3]strings.Builder
		for i := range parts {
			for range rng.IntN(1500) {
				parts[i].WriteString(pieces[rng.IntN(len(pieces))])
			}
		}
		a, b, c := parts[0].String(), parts[1].String(), parts[2].String()
		var st searchText
		st.WriteString(a)
		st.Write([]byte(b))
		st.WriteString(c)
		want := clip(strings.Join(strings.Fields(a+b+c), " "), maxSearchText)
		if got := clip(string(st.b), maxSearchText); got != want {
			t.Fatalf("%q %q %q:\ngot %q\nwant %q", a, b, c, got, want)
		}
	}
}
