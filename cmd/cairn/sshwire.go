package main

import (
	sshrunner "github.com/cairn-dev/cairn/executor/ssh"
	"github.com/cairn-dev/cairn/sandbox"
)

// newSSHRunner builds the ssh runner from flags, or from the sandbox
// inventory when the sandbox is in use and no flag says otherwise.
func newSSHRunner(f *execFlags, inv *sandbox.Inventory) (*sshrunner.Runner, string, error) {
	r := &sshrunner.Runner{ConfigFile: f.sshConfig, IdentityFiles: f.identity, TrustOnFirstUse: f.tofu}
	if f.knownHosts != "" {
		r.KnownHosts = []string{f.knownHosts}
	}
	note := ""
	if inv != nil && f.sshConfig == "" {
		r.ConfigFile = inv.SSHConfig
		if f.knownHosts == "" {
			r.KnownHosts = []string{inv.KnownHosts}
		}
		if len(f.identity) == 0 {
			r.IdentityFiles = []string{inv.IdentityFile}
		}
		r.User = inv.User
		note = "ssh blocks use the sandbox hosts (" + inv.SSHConfig + ")"
	}
	return r, note, nil
}
