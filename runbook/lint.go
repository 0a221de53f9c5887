package runbook

import (
	"fmt"
	"slices"
	"sync"
)

// A BlockLint checks one block for a mistake particular to a tool or a
// procedure that the model itself knows nothing of: a Leader Migration
// configuration's controller names, say. It calls report once per problem;
// a report is an error of the runbook (build, check, serve and run refuse
// it), at pos, a position in the file (Block.BodyPos counts the body's
// lines).
//
// Lints live in package lint and register themselves from an init
// function; a program runs the lints it links in (cmd/cairn imports lint).
// That keeps tool knowledge out of the model while every command that
// parses a runbook still applies it.
type BlockLint func(b *Block, report func(pos Pos, format string, args ...any))

var lints struct {
	sync.RWMutex
	names []string
	fns   []BlockLint
}

// RegisterLint adds a block lint under a name (for messages and docs). It
// panics on a name registered twice, as database/sql does for drivers.
func RegisterLint(name string, fn BlockLint) {
	lints.Lock()
	defer lints.Unlock()
	if slices.Contains(lints.names, name) {
		panic(fmt.Sprintf("runbook: lint %q registered twice", name))
	}
	lints.names = append(lints.names, name)
	lints.fns = append(lints.fns, fn)
}

// Lints lists the names of the registered lints, in registration order.
func Lints() []string {
	lints.RLock()
	defer lints.RUnlock()
	return slices.Clone(lints.names)
}

func (p *parseState) runLints(b *Block) {
	lints.RLock()
	fns := lints.fns
	lints.RUnlock()
	for _, fn := range fns {
		fn(b, p.errf)
	}
}
