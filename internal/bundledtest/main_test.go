package bundledtest_test

import (
	"os"
	"testing"

	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// These tests run the bundled runbooks' blocks (content/*.md, as shipped)
// through the executor as `cairn serve` wires it, against the shared
// sandbox's real servers, and check what the blocks did there. They lived
// in cmd/cairn; they test the runbooks, not the CLI. cmd/cairn/nodetest
// runs the same runbooks with the cairn binary on kubelet + containerd
// nodes.

func TestMain(m *testing.M) {
	// The local runner runs blocks through this binary's __supervise, as
	// cairn does through its own.
	if len(os.Args) > 1 && os.Args[1] == local.SuperviseArg {
		os.Exit(local.Supervise(os.Args[2:]))
	}
	os.Exit(testrig.Main(m))
}
