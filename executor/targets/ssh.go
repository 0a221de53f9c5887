package targets

import (
	sshrunner "github.com/cairn-dev/cairn/executor/ssh"
	"github.com/cairn-dev/cairn/sandbox"
)

// newSSHRunner builds the ssh runner from flags, or from the sandbox
// inventory when the sandbox is in use and no flag says otherwise.
func newSSHRunner(f Config, inv *sandbox.Inventory) (*sshrunner.Runner, string, error) {
	r := &sshrunner.Runner{ConfigFile: f.SSHConfig, IdentityFiles: f.Identity, TrustOnFirstUse: f.TrustOnFirstUse}
	if f.KnownHosts != "" {
		r.KnownHosts = []string{f.KnownHosts}
	}
	note := ""
	if inv != nil && f.SSHConfig == "" {
		r.ConfigFile = inv.SSHConfig
		if f.KnownHosts == "" {
			r.KnownHosts = []string{inv.KnownHosts}
		}
		if len(f.Identity) == 0 {
			r.IdentityFiles = []string{inv.IdentityFile}
		}
		r.User = inv.User
		note = "ssh blocks use the sandbox hosts (" + inv.SSHConfig + ")"
	}
	return r, note, nil
}
