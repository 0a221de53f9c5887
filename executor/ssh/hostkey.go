package ssh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Host key errors; a *HostKeyError wraps one of them.
var (
	ErrHostKeyUnknown = errors.New("host key unknown")
	ErrHostKeyChanged = errors.New("host key changed")
	ErrHostKeyRevoked = errors.New("host key revoked")
)

// HostKeyError is a refused host key: what the host presented and, for a
// changed key, what known_hosts lists for it.
type HostKeyError struct {
	Host  *Host
	Key   ssh.PublicKey         // the key the host presented
	Known []knownhosts.KnownKey // changed/revoked: the listed keys
	Err   error                 // ErrHostKeyUnknown, ErrHostKeyChanged or ErrHostKeyRevoked
	// ByAddr is set when the listed keys are those of the address the
	// connection reached ("127.0.0.1:2222"), not of the name dialled: the
	// name was new, its address was not (OpenSSH's CheckHostIP).
	ByAddr string
}

func (e *HostKeyError) Unwrap() error { return e.Err }

func (e *HostKeyError) Error() string {
	h := e.Host
	fp := e.Key.Type() + " " + ssh.FingerprintSHA256(e.Key)
	file := "~/.ssh/known_hosts"
	if len(h.KnownHosts) > 0 {
		file = h.KnownHosts[0]
	}
	host, port, _ := net.SplitHostPort(h.Addr)
	switch e.Err {
	case ErrHostKeyChanged:
		var known []string
		for _, k := range e.Known {
			known = append(known, fmt.Sprintf("%s %s at %s:%d", k.Key.Type(), ssh.FingerprintSHA256(k.Key), k.Filename, k.Line))
		}
		listed, name := "", h.Addr
		if e.ByAddr != "" {
			listed, name = fmt.Sprintf(" for its address %s, whatever name reaches it", e.ByAddr), e.ByAddr
		}
		return fmt.Sprintf("%s: HOST KEY CHANGED: the host presented %s, but known_hosts lists %s%s. "+
			"Someone may be intercepting the connection (man-in-the-middle), so cairn refuses to connect, even with trust-on-first-use. "+
			"If the change is expected (the host was reinstalled), remove the old key with: ssh-keygen -R %s -f %s, then connect again",
			h, fp, strings.Join(known, "; "), listed, shellWord(knownhosts.Normalize(name)), shellWord(e.Known[0].Filename))
	case ErrHostKeyRevoked:
		return fmt.Sprintf("%s: host key %s is marked @revoked in %s:%d; refusing to connect", h, fp, e.Known[0].Filename, e.Known[0].Line)
	default:
		return fmt.Sprintf("%s: host key unknown: the host presented %s, which is not in %s. "+
			"Check the fingerprint with the host's administrator (on the host: ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub), "+
			"then add it with: ssh-keyscan -p %s %s >> %s, or run with trust-on-first-use to record it on first connect",
			h, fp, strings.Join(h.KnownHosts, ", "), keyFileType(e.Key), port, shellWord(host), shellWord(file))
	}
}

func keyFileType(k ssh.PublicKey) string {
	switch k.Type() {
	case ssh.KeyAlgoED25519:
		return "ed25519"
	case ssh.KeyAlgoRSA:
		return "rsa"
	default:
		if strings.HasPrefix(k.Type(), "ecdsa-") {
			return "ecdsa"
		}
		return "*"
	}
}

// shellWord quotes s for a command line the reader copies, only when needed.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,_-/:@%+=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// knownHostsDB reads the existing files among h's known_hosts files (missing
// ones are skipped: a host is then unknown, not an error).
func knownHostsDB(h *Host) (ssh.HostKeyCallback, error) {
	var files []string
	for _, f := range slices.Concat(h.KnownHosts, h.GlobalKnownHosts) {
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() {
			files = append(files, f)
		}
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("%s: read known_hosts: %w", h, err)
	}
	return cb, nil
}

// probeKey is a key no host has: checking it against known_hosts returns a
// KeyError that lists every key known for the address.
var probeKey = func() ssh.PublicKey {
	k, err := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	if err != nil {
		panic(err)
	}
	return k
}()

// knownAlgorithms returns the host key algorithms to offer to h: those of
// the keys known_hosts lists for it first, so the host presents a key we can
// check, then every other supported one (a host that has only another type
// is then reported as changed, not as a handshake failure). nil when no key
// is known.
func knownAlgorithms(h *Host, cb ssh.HostKeyCallback) []string {
	var ke *knownhosts.KeyError
	err := cb(h.Addr, &net.TCPAddr{IP: net.IPv4zero, Port: 22}, probeKey)
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var algos []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algos = append(algos, t)
		}
	}
	for _, a := range ssh.SupportedAlgorithms().HostKeys {
		if !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	return slices.Compact(algos)
}

// remoteAddr is the address a connection reached, in its one spelling
// ("10.0.0.5:22"), whatever name or spelling was dialled; "" when remote is
// not a TCP address.
func remoteAddr(remote net.Addr) string {
	ta, ok := remote.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return ""
	}
	// netip prints an address in its one spelling (runbook.CanonicalIP).
	return net.JoinHostPort(ip.Unmap().WithZone(ta.Zone).String(), strconv.Itoa(ta.Port))
}

// checkKey checks key under the name dialled and, when that name is new,
// under the address the connection reached, as OpenSSH's CheckHostIP does:
// a new name (another spelling, an alias, a DNS name) for an address known
// with another key is a changed key, not a new host. It returns nil (known),
// a *HostKeyError (changed or revoked), or errUnknown with whether the
// address must be recorded beside the name.
func checkKey(h *Host, cb ssh.HostKeyCallback, hostname string, remote net.Addr, key ssh.PublicKey) (addAddr string, err error) {
	err = cb(hostname, remote, key)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &re):
		return "", &HostKeyError{Host: h, Key: key, Known: []knownhosts.KnownKey{re.Revoked}, Err: ErrHostKeyRevoked}
	case errors.As(err, &ke) && len(ke.Want) > 0:
		return "", &HostKeyError{Host: h, Key: key, Known: ke.Want, Err: ErrHostKeyChanged}
	case !errors.As(err, &ke):
		return "", fmt.Errorf("%s: check host key: %w", h, err)
	}
	addr := remoteAddr(remote)
	if addr == "" || knownhosts.Normalize(addr) == knownhosts.Normalize(hostname) {
		return "", errUnknown
	}
	err = cb(addr, remote, key)
	switch {
	case err == nil:
		return "", errUnknown // the address is known with this key; the name is new
	case errors.As(err, &re):
		return "", &HostKeyError{Host: h, Key: key, Known: []knownhosts.KnownKey{re.Revoked}, Err: ErrHostKeyRevoked, ByAddr: addr}
	case errors.As(err, &ke) && len(ke.Want) > 0:
		return "", &HostKeyError{Host: h, Key: key, Known: ke.Want, Err: ErrHostKeyChanged, ByAddr: addr}
	case errors.As(err, &ke):
		return addr, errUnknown
	default:
		return "", fmt.Errorf("%s: check host key: %w", h, err)
	}
}

// errUnknown is checkKey's verdict for a key known under neither the name
// nor the address.
var errUnknown = errors.New("unknown host key")

// hostKeyCallback checks the host's key against known_hosts. An unknown key
// is refused unless h.TrustOnFirstUse, in which case it is appended to the
// first known_hosts file; a changed or revoked key is always refused, also
// when it is the address, not the name, that known_hosts lists.
func (r *Runner) hostKeyCallback(h *Host, notify func(string)) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		cb, err := knownHostsDB(h)
		if err != nil {
			return err
		}
		_, err = checkKey(h, cb, hostname, remote, key)
		if err != errUnknown {
			return err
		}
		if !h.TrustOnFirstUse {
			return &HostKeyError{Host: h, Key: key, Err: ErrHostKeyUnknown}
		}
		return r.trust(h, hostname, remote, key, notify)
	}
}

// trust records key for the host in its first known_hosts file, under the
// name dialled and the address reached. Appends are serialised, and the
// file is read again under the lock, so parallel connections to one host
// write one line and a key another connection just recorded is checked,
// not added twice.
func (r *Runner) trust(h *Host, hostname string, remote net.Addr, key ssh.PublicKey, notify func(string)) error {
	if len(h.KnownHosts) == 0 {
		return &HostKeyError{Host: h, Key: key, Err: ErrHostKeyUnknown}
	}
	r.tofuMu.Lock()
	defer r.tofuMu.Unlock()
	cb, err := knownHostsDB(h)
	if err != nil {
		return err
	}
	addr, err := checkKey(h, cb, hostname, remote, key)
	if err != errUnknown {
		return err
	}
	file := h.KnownHosts[0]
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("%s: trust-on-first-use: %w", h, err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%s: trust-on-first-use: record the host key: %w", h, err)
	}
	names := []string{knownhosts.Normalize(hostname)}
	if addr != "" {
		names = append(names, knownhosts.Normalize(addr))
	}
	line := knownhosts.Line(names, key) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("%s: trust-on-first-use: write %s: %w", h, file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: trust-on-first-use: write %s: %w", h, file, err)
	}
	notify(fmt.Sprintf("trust-on-first-use: recorded %s's host key %s %s in %s", h, key.Type(), ssh.FingerprintSHA256(key), file))
	return nil
}
