package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// Host is a host value resolved for connecting: what the job named, and
// where, as whom and how it is checked.
type Host struct {
	Name  string // the value as given in job.Hosts ("cp1", "admin@10.0.0.5:2222")
	Alias string // the host part, looked up in the config file
	User  string
	Addr  string // host:port dialled (HostName and Port applied)
	// KnownHosts are the user known_hosts files; trust-on-first-use appends
	// to the first. GlobalKnownHosts are only read.
	KnownHosts       []string
	GlobalKnownHosts []string
	IdentityFiles    []string
	// IdentitiesOnly: offer only IdentityFiles, not the agent's keys.
	IdentitiesOnly  bool
	TrustOnFirstUse bool
	ConnectTimeout  time.Duration
}

// String names the host for messages: "ssh cp1 (10.200.0.11:22)".
func (h *Host) String() string {
	if h.Addr == "" || h.Addr == h.Name {
		return "ssh " + h.Name
	}
	return "ssh " + h.Name + " (" + h.Addr + ")"
}

// localEnv is what resolution reads from the process: the home directory and
// the local user name.
type localEnv struct {
	home, user string
}

func currentEnv() localEnv {
	e := localEnv{}
	e.home, _ = os.UserHomeDir()
	if u, err := user.Current(); err == nil {
		e.user = u.Username
	}
	if e.user == "" {
		e.user = os.Getenv("USER")
	}
	return e
}

// resolver resolves host values against one reading of the config file.
type resolver struct {
	r   *Runner
	cfg *clientConfig
	env localEnv
}

func (r *Runner) newResolver() (*resolver, error) {
	e := currentEnv()
	res := &resolver{r: r, env: e}
	path := r.ConfigFile
	explicit := path != ""
	if path == "" && e.home != "" {
		path = filepath.Join(e.home, ".ssh", "config")
	}
	if path == "" || path == "none" {
		return res, nil
	}
	cfg, err := readConfigFile(path, e.home)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return res, nil
		}
		return nil, fmt.Errorf("ssh config %s: %w", path, err)
	}
	res.cfg = cfg
	return res, nil
}

// Resolve resolves one host value the way Run would: [user@]host[:port]
// with the config file's Host sections applied. The engine can use it to
// show where a block will go before it runs.
func (r *Runner) Resolve(host string) (*Host, error) {
	res, err := r.newResolver()
	if err != nil {
		return nil, err
	}
	return res.resolve(host)
}

// splitHostValue splits [user@]host[:port] into its parts in their one
// spelling (runbook.ParseHost: lower-case names, IP addresses as netip
// prints them, IPv4-mapped IPv6 as IPv4, plain ports), so that known_hosts
// is consulted and written under one name per address.
func splitHostValue(v string) (user, host, port string, err error) {
	hv, err := runbook.ParseHost(v)
	if err != nil {
		return "", "", "", fmt.Errorf("host %q: %v", v, err)
	}
	return hv.User, hv.Host, hv.Port, nil
}

// canonicalHost is the one spelling of a host value: [user@]host[:port]
// with IPv6 addresses bracketed when a port follows.
func canonicalHost(user, host, port string) string {
	return runbook.HostValue{User: user, Host: host, Port: port}.String()
}

// resolve applies, for each setting, in order of precedence: the host value
// itself (user@, :port), the config file's first matching value, the
// Runner's field, the default. KnownHosts and TrustOnFirstUse set on the
// Runner override the config file (like ssh -o); IdentityFiles add to it.
func (res *resolver) resolve(v string) (*Host, error) {
	r := res.r
	user, alias, port, err := splitHostValue(v)
	if err != nil {
		return nil, err
	}
	h := &Host{Name: canonicalHost(user, alias, port), Alias: alias}
	o := res.cfg.lookup(alias)
	fail := func(key string, err error) (*Host, error) {
		op := o.first[key]
		return nil, fmt.Errorf("ssh %s: %s:%d: %v", v, op.file, op.line, err)
	}
	for k, name := range map[string]string{"proxyjump": "ProxyJump", "proxycommand": "ProxyCommand"} {
		if val, ok := o.get(k); ok && !strings.EqualFold(val, "none") {
			op := o.first[k]
			return nil, fmt.Errorf("ssh %s: %s:%d: %s is not supported by cairn's ssh runner; give the host's address directly, or run the block with target=local and your own ssh", v, op.file, op.line, name)
		}
	}
	hostname := alias
	if hn, ok := o.get("hostname"); ok {
		if hostname, err = expandTokens(hn, tokens{host: alias}); err != nil {
			return fail("hostname", err)
		}
		// HostName too has one spelling: it is what known_hosts is
		// consulted under.
		if hostname, err = runbook.CanonicalHostName(hostname); err != nil {
			return fail("hostname", fmt.Errorf("HostName %q: %v", hn, err))
		}
	}
	if port == "" {
		port = "22"
		if p, ok := o.get("port"); ok {
			if !runbook.CanonicalPort(p) {
				return fail("port", fmt.Errorf("Port %q is not a number from 1 to 65535 written plainly", p))
			}
			port = p
		}
	}
	if user == "" {
		user, _ = o.get("user")
	}
	if user == "" {
		user = r.User
	}
	if user == "" {
		user = res.env.user
	}
	if user == "" {
		return nil, fmt.Errorf("ssh %s: no user name: write user@host, set User in the ssh config, or configure a default user", v)
	}
	h.User = user
	h.Addr = net.JoinHostPort(hostname, port)
	tok := tokens{home: res.env.home, host: hostname, port: port, user: user, localUser: res.env.user}

	for _, f := range r.IdentityFiles {
		h.IdentityFiles = append(h.IdentityFiles, executor.ExpandHome(f, res.env.home))
	}
	for _, op := range o.ids {
		for _, a := range op.args {
			f, err := expandTokens(a, tok)
			if err != nil {
				return nil, fmt.Errorf("ssh %s: %s:%d: IdentityFile: %v", v, op.file, op.line, err)
			}
			h.IdentityFiles = append(h.IdentityFiles, f)
		}
	}
	if val, ok := o.get("identitiesonly"); ok {
		h.IdentitiesOnly = strings.EqualFold(val, "yes")
	}

	switch {
	case len(r.KnownHosts) > 0:
		for _, f := range r.KnownHosts {
			h.KnownHosts = append(h.KnownHosts, executor.ExpandHome(f, res.env.home))
		}
	case len(o.first["userknownhostsfile"].args) > 0:
		for _, a := range o.first["userknownhostsfile"].args {
			f, err := expandTokens(a, tok)
			if err != nil {
				return fail("userknownhostsfile", err)
			}
			h.KnownHosts = append(h.KnownHosts, f)
		}
	case res.env.home != "":
		h.KnownHosts = []string{filepath.Join(res.env.home, ".ssh", "known_hosts")}
	}
	if len(o.first["globalknownhostsfile"].args) > 0 {
		for _, a := range o.first["globalknownhostsfile"].args {
			f, err := expandTokens(a, tok)
			if err != nil {
				return fail("globalknownhostsfile", err)
			}
			h.GlobalKnownHosts = append(h.GlobalKnownHosts, f)
		}
	} else {
		h.GlobalKnownHosts = []string{"/etc/ssh/ssh_known_hosts"}
	}

	h.TrustOnFirstUse = r.TrustOnFirstUse
	if !h.TrustOnFirstUse {
		if val, ok := o.get("stricthostkeychecking"); ok {
			switch strings.ToLower(val) {
			case "accept-new", "no", "off":
				// Unknown keys are recorded; a changed key is still refused
				// (stricter than OpenSSH's "no").
				h.TrustOnFirstUse = true
			case "yes", "ask":
			default:
				return fail("stricthostkeychecking", fmt.Errorf("StrictHostKeyChecking %q: want yes, accept-new, no or ask", val))
			}
		}
	}

	h.ConnectTimeout = r.ConnectTimeout
	if h.ConnectTimeout == 0 {
		h.ConnectTimeout = defaultConnectTimeout
		if val, ok := o.get("connecttimeout"); ok {
			n, err := strconv.Atoi(val)
			if err != nil || n <= 0 {
				return fail("connecttimeout", fmt.Errorf("ConnectTimeout %q: want a number of seconds", val))
			}
			h.ConnectTimeout = time.Duration(n) * time.Second
		}
	}
	return h, nil
}
