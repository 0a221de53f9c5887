package runbook

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// One host, one spelling. Trust-on-first-use records a host key under the
// host's name; a second spelling of the same address ([::ffff:127.0.0.1],
// 127.1, CP0) would be a new name, and a changed key would be taken for a
// new host's. So every host value is reduced to one form before anything
// compares or records it, here in the model and, through ParseHost, in the
// SSH runner and the exported script's runtime:
//
//   - names are lowercased and written without a final dot;
//   - IP addresses are written as net/netip prints them: IPv4 as four
//     decimal numbers, an IPv4-mapped IPv6 address as its IPv4 address,
//     IPv6 compressed and lower-case (RFC 5952);
//   - a name whose last label is a number (127.1, 2130706433, 0x7f000001,
//     0177.0.0.1) is refused: resolvers read it as an IPv4 address in a
//     short, octal or hex form (the WHATWG URL rule "ends in a number");
//     the error gives the address to write instead;
//   - ports are written plainly (22, not 022 or +22);
//   - an IPv6 zone (fe80::1%eth0) may only be an interface name.

// HostValue is a parsed [user@]host[:port] in its one spelling.
type HostValue struct {
	User string // "" when the value names none
	Host string // a lower-case name or an IP address as netip prints it
	Port string // "" when the value names none
}

// String is the one spelling: [user@]host[:port], IPv6 in brackets when a
// port follows.
func (h HostValue) String() string {
	s := h.Host
	if h.Port != "" {
		s = net.JoinHostPort(h.Host, h.Port)
	}
	if h.User != "" {
		s = h.User + "@" + s
	}
	return s
}

// ParseHost parses [user@]host[:port]: host a DNS name, an IPv4 address, a
// bracketed IPv6 address with an optional port, or a bare IPv6 address. The
// result is in the one spelling described above.
func ParseHost(v string) (HostValue, error) {
	var hv HostValue
	h := v
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		hv.User, h = h[:i], h[i+1:]
		if !validUser(hv.User) {
			return HostValue{}, fmt.Errorf("bad user name in %q", v)
		}
	}
	switch {
	case strings.HasPrefix(h, "["):
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return HostValue{}, fmt.Errorf("not a host: %q: missing ] after the IPv6 address", v)
		}
		addr, rest := h[1:end], h[end+1:]
		a, err := CanonicalIP(addr)
		if err != nil {
			return HostValue{}, fmt.Errorf("not a host: %q: %v", v, err)
		}
		hv.Host = a
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return HostValue{}, fmt.Errorf("not a host: %q: want [address]:port", v)
			}
			if err := checkPort(p, v); err != nil {
				return HostValue{}, err
			}
			hv.Port = p
		}
		return hv, nil
	case strings.Count(h, ":") > 1:
		// A bare IPv6 address: no port (that needs brackets).
		a, err := CanonicalIP(h)
		if _, perr := netip.ParseAddr(h); perr == nil && err != nil {
			return HostValue{}, fmt.Errorf("not a host: %q: %v", v, err)
		}
		if err != nil {
			return HostValue{}, fmt.Errorf("not a host name or IP address: %q (an IPv6 address with a port is written [address]:port)", v)
		}
		hv.Host = a
		return hv, nil
	case strings.Contains(h, ":"):
		var p string
		h, p, _ = strings.Cut(h, ":")
		if err := checkPort(p, v); err != nil {
			return HostValue{}, err
		}
		hv.Port = p
	}
	if h == "" {
		return HostValue{}, fmt.Errorf("not a host: %q: empty host name", v)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		c, err := canonicalAddr(a)
		if err != nil {
			return HostValue{}, fmt.Errorf("not a host: %q: %v", v, err)
		}
		hv.Host = c
		return hv, nil
	}
	name, err := CanonicalName(h)
	if err != nil {
		return HostValue{}, fmt.Errorf("not a host name or IP address: %q: %v", v, err)
	}
	hv.Host = name
	return hv, nil
}

// CanonicalHost is the one spelling of a host value; a value ParseHost
// refuses is returned lowercased (validation reports it elsewhere).
func CanonicalHost(v string) string {
	hv, err := ParseHost(v)
	if err != nil {
		return strings.ToLower(v)
	}
	return hv.String()
}

// CanonicalIP is the one spelling of an IP address (see above), or an
// error saying why s is not one.
func CanonicalIP(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address", s)
	}
	return canonicalAddr(a)
}

var zoneRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

func canonicalAddr(a netip.Addr) (string, error) {
	if z := a.Zone(); z != "" && !zoneRe.MatchString(z) {
		return "", fmt.Errorf("IPv6 zone %q is not an interface name", z)
	}
	return a.Unmap().String(), nil
}

// CanonicalHostName is the one spelling of a bare host (an ssh_config
// HostName): an IP address (CanonicalIP) or a name (CanonicalName).
func CanonicalHostName(s string) (string, error) {
	if c, err := CanonicalIP(s); err == nil {
		return c, nil
	}
	return CanonicalName(s)
}

var labelRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62})$`)

// CanonicalName is the one spelling of a DNS host name: lowercased, no
// final dot; a name that ends in a number is refused, naming the address
// resolvers would read it as.
func CanonicalName(s string) (string, error) {
	n := strings.ToLower(s)
	if strings.HasSuffix(n, ".") {
		return "", fmt.Errorf("write the name without the final dot (%s)", strings.TrimSuffix(n, "."))
	}
	if len(n) > 253 {
		return "", fmt.Errorf("a host name has at most 253 characters")
	}
	labels := strings.Split(n, ".")
	for _, l := range labels {
		if !labelRe.MatchString(l) {
			return "", fmt.Errorf("not a host name: labels are letters, digits and inner hyphens, 1 to 63 of them")
		}
	}
	if numericLabel(labels[len(labels)-1]) {
		if a, ok := inetAton(n); ok {
			return "", fmt.Errorf("resolvers read it as the IPv4 address %s: write that", a)
		}
		return "", fmt.Errorf("a host name cannot end in a number (resolvers would read it as an IPv4 address)")
	}
	return n, nil
}

// numericLabel: the WHATWG "ends in a number" test for one label.
func numericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// inetAton reads s as inet_aton(3) does: one to four parts, each decimal,
// octal (leading 0) or hex (0x); the last fills the remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		base, d := 10, p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, d = 16, p[2:]
			if d == "" {
				d = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, d = 8, p[1:]
		}
		n, err := strconv.ParseUint(d, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func validUser(u string) bool {
	return u != "" && !strings.ContainsFunc(u, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune(":/@'\"$`;\\", r)
	})
}

// SplitHosts splits a host list on spaces and commas.
func SplitHosts(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' })
}

// validHost accepts [user@]host[:port] where host is a DNS name or an IP.
func validHost(v string) error {
	_, err := ParseHost(v)
	return err
}

// CanonicalPort reports whether p is a port in its one spelling: 22, not
// 022 or +22. Every other spelling reaches the same port under another
// known_hosts name, so trust-on-first-use would take a changed key for a
// new one; validation and the ssh runner both hold to it.
func CanonicalPort(p string) bool {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, _ := strconv.Atoi(p)
	return n <= 65535
}

func checkPort(p, v string) error {
	if !CanonicalPort(p) {
		return fmt.Errorf("bad port in %q: a number from 1 to 65535 written plainly (no sign, no leading zero)", v)
	}
	return nil
}
