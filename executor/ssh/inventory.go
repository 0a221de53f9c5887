package ssh

import (
	"encoding/json"
	"fmt"
	"os"
)

// FromInventory returns a Runner for the hosts of a sandbox inventory
// (inventory.json written by `cairn sandbox up`): its ssh_config names each
// host's address, port, user, key and known_hosts. Hosts the inventory does
// not list are reached as with the zero Runner (~/.ssh/known_hosts, the
// default keys, ssh-agent).
//
// Only the fields used here are read, so this package does not depend on
// the sandbox package.
func FromInventory(path string) (*Runner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	var inv struct {
		SSHConfig string `json:"sshConfig"`
	}
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("parse inventory %s: %w", path, err)
	}
	if inv.SSHConfig == "" {
		return nil, fmt.Errorf("inventory %s names no sshConfig; is it a cairn sandbox inventory?", path)
	}
	return &Runner{ConfigFile: inv.SSHConfig}, nil
}
