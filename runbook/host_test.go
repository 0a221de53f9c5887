package runbook

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestParseHostOneSpelling: every spelling of an address reduces to one, or
// is refused with the spelling to write instead. The review reached an
// impostor as [::ffff:127.0.0.1]:P after 127.0.0.1:P was refused with HOST
// KEY CHANGED: known_hosts was consulted under the odd spelling.
func TestParseHostOneSpelling(t *testing.T) {
	for _, tc := range []struct{ in, canon, err string }{
		{"cp0", "cp0", ""},
		{"CP0:42791", "cp0:42791", ""},
		{"Admin@CP0.Example.COM:2222", "Admin@cp0.example.com:2222", ""},
		{"127.0.0.1:2222", "127.0.0.1:2222", ""},
		{"[127.0.0.1]:2222", "127.0.0.1:2222", ""},
		{"[::ffff:127.0.0.1]:2222", "127.0.0.1:2222", ""},
		{"[::FFFF:7f00:1]:2222", "127.0.0.1:2222", ""},
		{"[0:0:0:0:0:ffff:127.0.0.1]:2222", "127.0.0.1:2222", ""},
		{"::ffff:10.0.0.5", "10.0.0.5", ""},
		{"root@[::1]:22", "root@[::1]:22", ""},
		{"[0:0:0:0:0:0:0:1]", "::1", ""},
		{"2001:DB8:0:0:0:0:0:1", "2001:db8::1", ""},
		{"[2001:db8:0:0:1:0:0:1]:22", "[2001:db8::1:0:0:1]:22", ""},
		{"fe80::1%eth0", "fe80::1%eth0", ""},
		{"127.1", "", "resolvers read it as the IPv4 address 127.0.0.1: write that"},
		{"127.1:22", "", "127.0.0.1"},
		{"2130706433", "", "127.0.0.1"},
		{"0x7f000001", "", "127.0.0.1"},
		{"0X7F000001:22", "", "127.0.0.1"},
		{"0177.0.0.1", "", "127.0.0.1"},
		{"10.0.0.010", "", "10.0.0.8"},
		{"1.2.3.4.5", "", "cannot end in a number"},
		{"a.b.1", "", "cannot end in a number"},
		{"cp0.", "", "without the final dot"},
		{"cp0:042791", "", "written plainly"},
		{"cp0:+42791", "", "written plainly"},
		{"cp0:0", "", "written plainly"},
		{"cp0:65536", "", "written plainly"},
		{"[::1]:022", "", "written plainly"},
		{"[:]", "", "not an IP address"},
		{"[]", "", "not an IP address"},
		{"[::1", "", "missing ]"},
		{"::1:22x", "", "not a host name or IP address"},
		{"fe80::1%a,b", "", "zone"},
		{"fe80::1%a b", "", "zone"},
		{"a b", "", "not a host name"},
		{"@cp0", "", "bad user name"},
		{"a;b@cp0", "", "bad user name"},
		{"cp_0", "", "not a host name"},
		{"", "", "empty host name"},
	} {
		hv, err := ParseHost(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %q, %v; want an error with %q", tc.in, hv, err, tc.err)
			}
			continue
		}
		if err != nil || hv.String() != tc.canon {
			t.Errorf("%q: got %q, %v; want %q", tc.in, hv, err, tc.canon)
		}
	}
}

// spellings gives other ways to write the address a: IPv4 as an
// IPv4-mapped IPv6 address (compressed, hex, expanded), IPv6 expanded and
// upper-case.
func spellings(a netip.Addr) []string {
	var out []string
	if a.Is4() {
		b := a.As4()
		out = append(out,
			"::ffff:"+a.String(),
			fmt.Sprintf("::FFFF:%x:%x", uint16(b[0])<<8|uint16(b[1]), uint16(b[2])<<8|uint16(b[3])),
			"0:0:0:0:0:ffff:"+a.String(),
		)
		return out
	}
	x := a.As16()
	var groups []string
	for i := 0; i < 16; i += 2 {
		groups = append(groups, fmt.Sprintf("%04X", uint16(x[i])<<8|uint16(x[i+1])))
	}
	out = append(out, strings.Join(groups, ":"), strings.ToUpper(a.String()))
	return out
}

// FuzzParseHost: an accepted value's spelling parses to itself, and every
// other spelling of the same address gives the same spelling: one address,
// one known_hosts name.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"cp0", "a@b:22", "[::1]:2222", "::1", "x:042791", "x:+1", "A@B", "[:]", "127.1",
		"[::ffff:127.0.0.1]:2", "10.0.0.1", "2001:db8::1", "fe80::1%eth0", "0x7f.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		hv, err := ParseHost(v)
		if err != nil {
			return
		}
		if hv.Port != "" && !CanonicalPort(hv.Port) {
			t.Fatalf("%q: port %q accepted", v, hv.Port)
		}
		c := hv.String()
		hv2, err := ParseHost(c)
		if err != nil || hv2 != hv {
			t.Fatalf("%q -> %q -> %q, %v", v, c, hv2, err)
		}
		a, err := netip.ParseAddr(hv.Host)
		if err != nil {
			if _, ok := inetAton(hv.Host); ok {
				t.Fatalf("%q: %q is a name that resolvers read as an address", v, hv.Host)
			}
			return
		}
		if a.Unmap().String() != hv.Host {
			t.Fatalf("%q: address spelled %q, want %q", v, hv.Host, a.Unmap().String())
		}
		for _, s := range spellings(a.Unmap()) {
			if a.Zone() != "" {
				break
			}
			for _, w := range []string{s, "[" + s + "]"} {
				other, err := ParseHost(w)
				if err != nil || other.Host != hv.Host {
					t.Fatalf("%q and %q name one address: %q, %v vs %q", v, w, other.Host, err, hv.Host)
				}
			}
		}
	})
}
