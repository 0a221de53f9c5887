package export_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
)

// hostCases are host values in many spellings: the model's table, every
// IPv4-mapped and expanded form of some addresses, names that end in a
// number, and random IPv6 addresses written with random case, zeros and
// compression.
func hostCases() []string {
	vs := []string{
		"cp0", "CP0:42791", "Admin@CP0.Example.COM:2222", "127.0.0.1:2222", "[127.0.0.1]:2222",
		"[::ffff:127.0.0.1]:2222", "[::FFFF:7f00:1]:2222", "[0:0:0:0:0:ffff:127.0.0.1]:2222", "::ffff:10.0.0.5",
		"root@[::1]:22", "[0:0:0:0:0:0:0:1]", "2001:DB8:0:0:0:0:0:1", "[2001:db8:0:0:1:0:0:1]:22", "fe80::1%eth0",
		"::", "::1.2.3.4", "1::", "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "::1:2:3:4:5:6:7",
		"1:2:3:4:5:6::1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "::ffff:1.2.3", "::ffff:01.2.3.4", "0001::00ff",
		"00001::", "1:::2", ":1::2", "1::2:", "::ffff:1.2.3.4%eth0", "fe80::1%", "fe80::1%a,b", "fe80::1%a b",
		"127.1", "127.1:22", "2130706433", "0x7f000001", "0X7F000001:22", "0177.0.0.1", "10.0.0.010", "1.2.3.4.5",
		"a.b.1", "0x", "x.0x", "x.0xg", "1.2.3.256", "1.2.65536", "4294967296", "08", "0.0.0.0", "00.0.0.0",
		"cp0.", "cp0:042791", "cp0:+42791", "cp0:0", "cp0:65535", "cp0:65536", "[::1]:022", "[:]", "[]", "[::1",
		"[::1]x", "[::1]:", "::1:22x", "a b", "@cp0", "a;b@cp0", "a\\b@cp0", "u@v@cp0", "cp_0", "", ":22", "-a",
		"a-", "a..b", strings.Repeat("a", 64), strings.Repeat("a.", 127) + "a", strings.Repeat("a.", 126) + "aa",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []string{"127.0.0.1", "10.200.0.11", "192.168.255.1", "0.0.0.0"} {
		a := netip.MustParseAddr(s).As4()
		hi, lo := uint16(a[0])<<8|uint16(a[1]), uint16(a[2])<<8|uint16(a[3])
		vs = append(vs, "::ffff:"+s, fmt.Sprintf("::FFFF:%x:%X", hi, lo), "0:0:0:0:0:ffff:"+s,
			fmt.Sprintf("0000:0000:0000:0000:0000:FFFF:%04x:%04x", hi, lo), "[::ffff:"+s+"]:22", "::"+s)
	}
	for range 300 {
		var g [8]uint16
		for i := range g {
			switch rng.IntN(3) {
			case 0:
				g[i] = 0
			case 1:
				g[i] = uint16(rng.IntN(16))
			default:
				g[i] = uint16(rng.Uint32())
			}
		}
		var parts []string
		for _, x := range g {
			f := "%x"
			switch rng.IntN(3) {
			case 1:
				f = "%04X"
			case 2:
				f = "%X"
			}
			parts = append(parts, fmt.Sprintf(f, x))
		}
		full := strings.Join(parts, ":")
		vs = append(vs, full)
		// Compress a random run of groups into ::, whatever they hold:
		// some of these are not addresses at all.
		i := rng.IntN(8)
		j := i + rng.IntN(8-i) + 1
		vs = append(vs, strings.Join(parts[:i], ":")+"::"+strings.Join(parts[j:], ":"))
		vs = append(vs, "["+full+"]:"+fmt.Sprint(1+rng.IntN(65535)))
	}
	for range 100 {
		var parts []string
		for range 1 + rng.IntN(4) {
			switch rng.IntN(3) {
			case 0:
				parts = append(parts, fmt.Sprint(rng.IntN(300)))
			case 1:
				parts = append(parts, fmt.Sprintf("0%o", rng.IntN(300)))
			default:
				parts = append(parts, fmt.Sprintf("0x%x", rng.IntN(300)))
			}
		}
		vs = append(vs, strings.Join(parts, "."))
	}
	return vs
}

// TestHostSpellingMatchesModel: the exported script's runtime gives every
// host value the spelling the model gives it (runbook.ParseHost), and
// refuses what the model refuses with the same message, so a script on an
// air-gapped site consults known_hosts under the same name cairn run would.
func TestHostSpellingMatchesModel(t *testing.T) {
	rb := parse(t, minimal)
	script := scriptFor(t, rb)
	cases := hostCases()
	in := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(in, []byte(strings.Join(cases, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One call per value in this shell (no command substitution): a fork
	// per value made the loop slow enough to hit the harness's hang guard
	// on a loaded CI machine.
	out, err := harness(t, script, "", `why=$cairn_tmp/why
	while IFS= read -r v; do
		if cairn_canon_host "$v" >"$why"; then printf 'ok %s\n' "$cairn_host"; else printf 'err %s\n' "$(<"$why")"; fi
	done <"$HOSTS"`, "HOSTS="+in)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(cases) {
		t.Fatalf("%d answers for %d values:\n%s", len(got), len(cases), out)
	}
	for i, v := range cases {
		want := ""
		hv, err := runbook.ParseHost(v)
		if err != nil {
			want = "err " + err.Error()
		} else {
			want = "ok " + hv.String()
		}
		if strconv.Quote(v) != `"`+v+`"` {
			// The model quotes odd values Go's way (%q); only the verdict
			// and the spelling need agree.
			got[i], _, _ = strings.Cut(got[i], " ")
			want, _, _ = strings.Cut(want, " ")
		}
		if got[i] != want {
			t.Errorf("%q: script %q, model %q", v, got[i], want)
		}
	}
}
