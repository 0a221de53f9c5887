package ssh

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runbook"
)

func TestSplitConfigLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		key  string
		args []string
	}{
		{"", "", nil},
		{"   # comment", "", nil},
		{"Host cp0 cp1", "host", []string{"cp0", "cp1"}},
		{"  HostName=10.0.0.1", "hostname", []string{"10.0.0.1"}},
		{"Port = 2222", "port", []string{"2222"}},
		{"Port =2222", "port", []string{"2222"}},
		{"Port= 2222", "port", []string{"2222"}},
		{"\tIdentityFile \"~/my keys/id\" # trailing comment", "identityfile", []string{"~/my keys/id"}},
		{"UserKnownHostsFile '/a b' /c", "userknownhostsfile", []string{"/a b", "/c"}},
		{"User a\"b c\"d", "user", []string{"ab cd"}},
	} {
		key, args, err := splitConfigLine(tc.line)
		if err != nil || key != tc.key || !slices.Equal(args, tc.args) {
			t.Errorf("%q: %q %q %v; want %q %q", tc.line, key, args, err, tc.key, tc.args)
		}
	}
	for _, bad := range []string{`User "open`, `=value`} {
		if _, _, err := splitConfigLine(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestWildcard(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		ok     bool
	}{
		{"*", "anything", true},
		{"cp?", "cp1", true},
		{"cp?", "cp10", false},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"10.0.*.1", "10.0.3.1", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"[ab]", "a", false}, // no character classes in ssh_config
	} {
		if got := wildcard(tc.pat, tc.s); got != tc.ok {
			t.Errorf("wildcard(%q, %q) = %v", tc.pat, tc.s, got)
		}
	}
}

func writeConfig(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResolveConfig resolves host values through a config file written
// here, as OpenSSH would: first value wins, IdentityFile accumulates,
// negated patterns, Include, Match all, tokens.
func TestResolveConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	writeConfig(t, home, ".ssh/conf.d/extra.conf", `
Host db*
  User dba
  Port 2200
`)
	cfg := writeConfig(t, home, "ssh_config", `
# global defaults
ConnectTimeout 3
Include conf.d/*.conf

Host cp? !cp9
  HostName 10.200.0.1%h
  User admin
  IdentityFile ~/.ssh/cp_key
  UserKnownHostsFile %d/kh/%h
  StrictHostKeyChecking accept-new

Host cp1
  User ignored-first-wins
  IdentityFile /keys/%r@%h:%p

Host bastioned
  ProxyJump jump.example.com

Match host foo exec "true"
  User never

Match all
  User fallback
  IdentityFile /keys/default
`)
	r := &Runner{ConfigFile: cfg, User: "runner-default", AgentSocket: "none"}
	for _, tc := range []struct {
		value string
		want  Host
	}{
		{"cp1", Host{User: "admin", Addr: "10.200.0.1cp1:22", IdentityFiles: []string{home + "/.ssh/cp_key", "/keys/admin@10.200.0.1cp1:22", "/keys/default"},
			KnownHosts: []string{home + "/kh/10.200.0.1cp1"}, TrustOnFirstUse: true, ConnectTimeout: 3 * time.Second}},
		{"root@cp2:2022", Host{User: "root", Addr: "10.200.0.1cp2:2022", IdentityFiles: []string{home + "/.ssh/cp_key", "/keys/default"},
			KnownHosts: []string{home + "/kh/10.200.0.1cp2"}, TrustOnFirstUse: true, ConnectTimeout: 3 * time.Second}},
		{"cp9", Host{User: "fallback", Addr: "cp9:22", IdentityFiles: []string{"/keys/default"},
			KnownHosts: []string{home + "/.ssh/known_hosts"}, ConnectTimeout: 3 * time.Second}},
		{"db1", Host{User: "dba", Addr: "db1:2200", IdentityFiles: []string{"/keys/default"},
			KnownHosts: []string{home + "/.ssh/known_hosts"}, ConnectTimeout: 3 * time.Second}},
		{"[fd00::1]:2222", Host{User: "fallback", Addr: "[fd00::1]:2222", IdentityFiles: []string{"/keys/default"},
			KnownHosts: []string{home + "/.ssh/known_hosts"}, ConnectTimeout: 3 * time.Second}},
		{"fd00::2", Host{User: "fallback", Addr: "[fd00::2]:22", IdentityFiles: []string{"/keys/default"},
			KnownHosts: []string{home + "/.ssh/known_hosts"}, ConnectTimeout: 3 * time.Second}},
	} {
		h, err := r.Resolve(tc.value)
		if err != nil {
			t.Errorf("%s: %v", tc.value, err)
			continue
		}
		if h.User != tc.want.User || h.Addr != tc.want.Addr || !slices.Equal(h.IdentityFiles, tc.want.IdentityFiles) ||
			!slices.Equal(h.KnownHosts, tc.want.KnownHosts) || h.TrustOnFirstUse != tc.want.TrustOnFirstUse || h.ConnectTimeout != tc.want.ConnectTimeout {
			t.Errorf("%s:\n got  %+v\n want %+v", tc.value, *h, tc.want)
		}
	}

	// Runner fields set explicitly override the config (like ssh -o).
	r2 := &Runner{ConfigFile: cfg, KnownHosts: []string{"~/other"}, ConnectTimeout: time.Second, TrustOnFirstUse: true}
	h, err := r2.Resolve("cp9")
	if err != nil || !slices.Equal(h.KnownHosts, []string{home + "/other"}) || h.ConnectTimeout != time.Second || !h.TrustOnFirstUse {
		t.Errorf("overrides: %+v %v", h, err)
	}

	if _, err := r.Resolve("bastioned"); err == nil || !strings.Contains(err.Error(), "ProxyJump is not supported") || !strings.Contains(err.Error(), cfg+":") {
		t.Errorf("ProxyJump: %v", err)
	}
	for _, bad := range []string{"user@", "@h", "cp1:0", "cp1:x", "[::1", "[::1]x"} {
		if _, err := r.Resolve(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// No config file at the default place is fine; a named one must exist.
	if _, err := (&Runner{}).Resolve("h"); err != nil {
		t.Errorf("no ~/.ssh/config: %v", err)
	}
	if _, err := (&Runner{ConfigFile: filepath.Join(home, "nope")}).Resolve("h"); err == nil {
		t.Error("a missing named config file is not an error")
	}
	if h, err := (&Runner{ConfigFile: "none", User: "u"}).Resolve("h"); err != nil || h.User != "u" || h.Addr != "h:22" {
		t.Errorf("ConfigFile none: %+v %v", h, err)
	}
}

func TestExpandTokens(t *testing.T) {
	tok := tokens{home: "/home/u", host: "h", port: "22", user: "r", localUser: "l"}
	if got, err := expandTokens("~/%u/%r@%h:%p/%%/%d", tok); err != nil || got != "/home/u/l/r@h:22/%//home/u" {
		t.Errorf("got %q %v", got, err)
	}
	for _, bad := range []string{"%C", "x%"} {
		if _, err := expandTokens(bad, tok); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestControlWriter(t *testing.T) {
	var out strings.Builder
	w := &controlWriter{out: &out, found: make(chan struct{})}
	for _, chunk := range []string{"motd line\ncairn-", "sid=4", "2\nlater ", "output\n"} {
		w.Write([]byte(chunk))
	}
	if w.sid() != 42 || out.String() != "motd line\nlater output\n" {
		t.Errorf("sid %d, passed on %q", w.sid(), out.String())
	}
	select {
	case <-w.found:
	default:
		t.Error("found not closed")
	}
}

func FuzzConfig(f *testing.F) {
	f.Add("Host a b\n  HostName x\nPort=22\nMatch all\nUser 'q r'\n", "a")
	f.Add("Host *\n IdentityFile \"%d/k\"\n", "zz")
	f.Add("Host !x *\nUser \"\n", "x")
	f.Fuzz(func(t *testing.T, text, alias string) {
		cfg := &clientConfig{}
		if err := cfg.read(strings.NewReader(text), "fuzz", "/home", nil, maxIncludeDepth); err != nil {
			return
		}
		o := cfg.lookup(alias)
		for k, op := range o.first {
			if k != op.key || !op.cond.matches(alias) {
				t.Fatalf("%q: option %q does not apply", alias, k)
			}
		}
	})
}

// TestHostValueSpellings: a port has one spelling. The review dialled
// 42791 as "042791" and "+42791", and known_hosts was consulted under the
// odd spelling, so trust-on-first-use recorded a changed key as new.
func TestHostValueSpellings(t *testing.T) {
	for _, tc := range []struct{ in, canon, err string }{
		{"cp0:42791", "cp0:42791", ""},
		{"CP0:42791", "cp0:42791", ""},
		{"root@[::1]:22", "root@[::1]:22", ""},
		{"10.0.0.5", "10.0.0.5", ""},
		{"cp0:042791", "", "written plainly"},
		{"cp0:+42791", "", "written plainly"},
		{"cp0:0", "", "written plainly"},
		{"cp0:65536", "", "written plainly"},
		{"cp0: 22", "", "written plainly"},
		{"[::1]:022", "", "written plainly"},
		{"[::ffff:127.0.0.1]:42791", "127.0.0.1:42791", ""},
		{"[0:0:0:0:0:ffff:127.0.0.1]:42791", "127.0.0.1:42791", ""},
		{"[::ffff:7f00:1]:42791", "127.0.0.1:42791", ""},
		{"127.1:42791", "", "127.0.0.1"},
		{"[:]", "", "not an IP address"},
	} {
		u, h, p, err := splitHostValue(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || canonicalHost(u, h, p) != tc.canon {
			t.Errorf("%q: %q %v, want %q", tc.in, canonicalHost(u, h, p), err, tc.canon)
		}
	}
}

// FuzzSplitHostValue: whatever is accepted has one canonical spelling that
// splits back to itself, with a port of digits only.
func FuzzSplitHostValue(f *testing.F) {
	for _, s := range []string{"cp0", "a@b:22", "[::1]:2222", "::1", "x:042791", "x:+1", "A@B", "[:]", "[::ffff:127.0.0.1]:22"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		u, h, p, err := splitHostValue(v)
		if err != nil {
			return
		}
		if p != "" && !runbook.CanonicalPort(p) {
			t.Fatalf("%q: port %q accepted", v, p)
		}
		c := canonicalHost(u, h, p)
		u2, h2, p2, err := splitHostValue(c)
		if err != nil || u2 != u || h2 != h || p2 != p {
			t.Fatalf("%q -> %q -> (%q %q %q %v)", v, c, u2, h2, p2, err)
		}
	})
}
