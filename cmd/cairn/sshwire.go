package main

import (
	"errors"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/sandbox"
)

// newSSHRunner builds the ssh runner from flags or the sandbox inventory.
func newSSHRunner(f *execFlags, inv *sandbox.Inventory) (executor.Runner, string, error) {
	return nil, "", errors.New("the ssh runner is not wired yet")
}
