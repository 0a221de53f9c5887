package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// LoadInventory reads an inventory.json written by Up.
func LoadInventory(path string) (*Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	var inv Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("parse inventory %s: %w", path, err)
	}
	return &inv, nil
}

// ClientConfig returns an SSH client configuration for the inventory's user
// and key that checks host keys against its known_hosts file (a changed key
// is refused).
func (inv *Inventory) ClientConfig() (*ssh.ClientConfig, error) {
	return inv.ClientConfigWithKnownHosts(inv.KnownHosts)
}

// ClientConfigWithKnownHosts is ClientConfig with another known_hosts file.
func (inv *Inventory) ClientConfigWithKnownHosts(knownHostsPath string) (*ssh.ClientConfig, error) {
	keyPEM, err := os.ReadFile(inv.IdentityFile)
	if err != nil {
		return nil, fmt.Errorf("read client key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse client key %s: %w", inv.IdentityFile, err)
	}
	hostKeys, err := knownhosts.New(knownHostsPath)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts: %w", err)
	}
	return &ssh.ClientConfig{
		User:              inv.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   hostKeys,
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout:           5 * time.Second,
	}, nil
}

// Dial connects to the named host with cfg (ClientConfig if nil). It refuses
// to dial a namespace address whose bridge is gone, so that no packet for
// 10.200.N.x ever leaves by the default route.
func (inv *Inventory) Dial(ctx context.Context, name string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	h, ok := inv.Host(name)
	if !ok {
		return nil, fmt.Errorf("ssh: no host %q in the inventory", name)
	}
	if inv.Mode == NetworkNamespaces && !onLocalBridge(h.Address) {
		return nil, fmt.Errorf("ssh: host %s (%s) is not on a bridge of this machine; is the sandbox up? (cairn sandbox status)", name, h.Address)
	}
	if cfg == nil {
		var err error
		if cfg, err = inv.ClientConfig(); err != nil {
			return nil, err
		}
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, cfg.Timeout+time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", h.Addr())
	if err != nil {
		return nil, fmt.Errorf("ssh: dial %s (%s): %w", name, h.Addr(), err)
	}
	if dl, ok := dctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, h.Addr(), cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh: handshake with %s (%s): %w", name, h.Addr(), err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// onLocalBridge reports whether ip is in the subnet of a cairn bridge on this
// machine.
func onLocalBridge(ip string) bool {
	addr := net.ParseIP(ip)
	ifaces, err := net.Interfaces()
	if err != nil {
		return false
	}
	for _, ifc := range ifaces {
		if len(ifc.Name) < 8 || ifc.Name[:8] != "cairn-br" {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.Contains(addr) {
				return true
			}
		}
	}
	return false
}

// IsHostKeyChanged reports whether err is a host key mismatch: the host
// presented a key other than the one known_hosts lists for it.
func IsHostKeyChanged(err error) bool {
	var ke *knownhosts.KeyError
	return errors.As(err, &ke) && len(ke.Want) > 0
}
