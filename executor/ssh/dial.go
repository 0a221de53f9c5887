package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// client is one connection to a host and its hold on the shared agent
// connection its auth used, let go together.
type client struct {
	*ssh.Client
	host    *Host
	release func()      // of the agent connection; nil without one
	lost    atomic.Bool // closed by keepAlive: the host stopped answering
}

func (c *client) Close() error {
	err := c.Client.Close()
	if c.release != nil {
		c.release()
	}
	return err
}

// agentShare is one connection to ssh-agent shared by every host
// connection the runner has open at once (the agent client is safe for
// concurrent use): a block on a thousand hosts would otherwise hold a
// thousand agent sockets, past ssh-agent's own limit on open files.
type agentShare struct {
	mu     sync.Mutex
	sock   string
	conn   net.Conn
	client agent.ExtendedAgent
	refs   int
}

// signers asks the agent at sock for its keys over the shared connection
// (dialled when there is none) and holds the connection until release.
func (s *agentShare) signers(ctx context.Context, sock string) (_ []ssh.Signer, release func(), _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.sock != sock && s.refs > 0 {
		// Another agent is in use (a changed SSH_AUTH_SOCK): a private
		// connection for this host.
		c, client, err := dialAgent(ctx, sock)
		if err != nil {
			return nil, nil, err
		}
		ss, err := client.Signers()
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return ss, func() { c.Close() }, nil
	}
	if s.conn == nil || s.sock != sock {
		if s.conn != nil {
			s.conn.Close()
			s.conn = nil
		}
		c, client, err := dialAgent(ctx, sock)
		if err != nil {
			return nil, nil, err
		}
		s.sock, s.conn, s.client = sock, c, client
	}
	ss, err := s.client.Signers()
	if err != nil {
		if s.refs == 0 {
			s.conn.Close()
			s.conn = nil
		}
		return nil, nil, err
	}
	s.refs++
	conn := s.conn
	return ss, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refs--
		if s.refs == 0 && s.conn == conn {
			s.conn.Close()
			s.conn = nil
		}
	}), nil
}

func dialAgent(ctx context.Context, sock string) (net.Conn, agent.ExtendedAgent, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, nil, err
	}
	return c, agent.NewClient(c), nil
}

// authSource is the keys offered to a host and notes on the ones that could
// not be offered, for the error message when authentication fails.
type authSource struct {
	signers []ssh.Signer
	tried   []string
	notes   []string
	release func() // the agent connection; nil without one
}

// keys loads h's identity files (or the default ones) and, unless
// IdentitiesOnly, the ssh-agent's keys.
func (r *Runner) keys(ctx context.Context, h *Host) *authSource {
	a := &authSource{}
	seen := map[string]bool{}
	add := func(s ssh.Signer) {
		k := string(s.PublicKey().Marshal())
		if !seen[k] {
			seen[k] = true
			a.signers = append(a.signers, s)
		}
	}
	files, explicit := h.IdentityFiles, true
	if len(files) == 0 {
		explicit = false
		if home, err := os.UserHomeDir(); err == nil {
			for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
				files = append(files, filepath.Join(home, ".ssh", n))
			}
		}
	}
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			if explicit || !errors.Is(err, os.ErrNotExist) {
				a.notes = append(a.notes, fmt.Sprintf("cannot read identity file %s: %v", f, err))
			}
			continue
		}
		s, err := ssh.ParsePrivateKey(pem)
		var pm *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pm):
			a.notes = append(a.notes, fmt.Sprintf("%s is passphrase-protected: load it into ssh-agent (ssh-add %s)", f, f))
			continue
		case err != nil:
			a.notes = append(a.notes, fmt.Sprintf("identity file %s: %v", f, err))
			continue
		}
		add(s)
		a.tried = append(a.tried, f)
	}
	sock := r.AgentSocket
	if sock == "" {
		sock = os.Getenv("SSH_AUTH_SOCK")
	}
	if sock != "" && sock != "none" && !h.IdentitiesOnly {
		ss, release, err := r.agents.signers(ctx, sock)
		if err != nil {
			a.notes = append(a.notes, fmt.Sprintf("ssh-agent at %s: %v", sock, err))
		} else {
			a.release = release
			for _, s := range ss {
				add(s)
			}
			a.tried = append(a.tried, fmt.Sprintf("ssh-agent (%d keys)", len(ss)))
		}
	}
	return a
}

func (a *authSource) describe() string {
	s := "tried: " + strings.Join(a.tried, ", ")
	if len(a.tried) == 0 {
		s = "no keys"
	}
	if len(a.notes) > 0 {
		s += "; " + strings.Join(a.notes, "; ")
	}
	return s
}

// dial connects to h and authenticates, within h.ConnectTimeout and ctx.
// notify receives notices for the reader (a host key recorded on first use).
func (r *Runner) dial(ctx context.Context, h *Host, notify func(string)) (*client, error) {
	known, err := knownHostsDB(h)
	if err != nil {
		return nil, err
	}
	auth := r.keys(ctx, h)
	closeAgent := func() {
		if auth.release != nil {
			auth.release()
		}
	}
	if len(auth.signers) == 0 {
		closeAgent()
		return nil, fmt.Errorf("%s: no SSH key to log in as %s with (%s); set IdentityFile in the ssh config, configure identity files, or start ssh-agent and ssh-add a key", h, h.User, auth.describe())
	}
	var (
		keyMu  sync.Mutex
		keyErr error // the host key check's verdict, for the error message
	)
	check := r.hostKeyCallback(h, notify)
	cfg := &ssh.ClientConfig{
		User: h.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) { return auth.signers, nil })},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			err := check(hostname, remote, key)
			keyMu.Lock()
			keyErr = err
			keyMu.Unlock()
			return err
		},
		HostKeyAlgorithms: knownAlgorithms(h, known),
		Timeout:           h.ConnectTimeout,
	}

	// ConnectTimeout counts from the turn to connect, not from the wait
	// for it behind the hosts ahead.
	turnDone, err := r.handshake(ctx)
	if err != nil {
		closeAgent()
		return nil, fmt.Errorf("%s: connect: %w", h, ctxErr(ctx))
	}
	defer turnDone()
	dctx, cancel := context.WithTimeout(ctx, h.ConnectTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", h.Addr)
	if err != nil {
		closeAgent()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: connect: %w", h, ctxErr(ctx))
		}
		if dctx.Err() != nil {
			return nil, fmt.Errorf("%s: connect: no answer within %s; check that the host is up and reachable from this machine", h, h.ConnectTimeout)
		}
		return nil, fmt.Errorf("%s: connect: %w; check that the host is up and sshd listens on that port", h, err)
	}
	// The handshake reads and writes nc; closing it is how ctx interrupts it.
	stop := onDone(dctx, func() { nc.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(nc, h.Addr, cfg)
	if !stop() && err == nil {
		cc.Close()
		err = dctx.Err()
	}
	if err != nil {
		nc.Close()
		closeAgent()
		keyMu.Lock()
		defer keyMu.Unlock()
		switch {
		case keyErr != nil:
			return nil, keyErr
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s: connect: %w", h, ctxErr(ctx))
		case dctx.Err() != nil:
			return nil, fmt.Errorf("%s: the SSH handshake did not finish within %s; check sshd on the host (its log says why)", h, h.ConnectTimeout)
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("%s: authentication as %s failed: the host accepted none of the keys offered (%s); add the public key to ~%s/.ssh/authorized_keys on the host, or log in as another user", h, h.User, auth.describe(), h.User)
		default:
			return nil, fmt.Errorf("%s: %w", h, err)
		}
	}
	return &client{Client: ssh.NewClient(cc, chans, reqs), host: h, release: auth.release}, nil
}

// onDone runs f when ctx ends, unless the returned stop is called first.
// stop reports whether it prevented f; if f had started, stop waits for it
// to finish, so that f never outlives its caller.
func onDone(ctx context.Context, f func()) (stop func() bool) {
	ran := make(chan struct{})
	s := context.AfterFunc(ctx, func() {
		defer close(ran)
		f()
	})
	return func() bool {
		if s() {
			return true
		}
		<-ran
		return false
	}
}

// boundedBuffer keeps the first max bytes written to it (remote stderr for
// error messages).
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}
