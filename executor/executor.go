// Package executor runs runbook blocks on their targets, verifies what they
// printed against the block's expectations, extracts captures and records
// every run in a journal. Runners for each target live in subpackages
// (local, ssh, kube) and are handed to an Engine, so this package imports
// none of them.
package executor

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/runbook"
)

// Runner runs one block on its target. Output goes to out as it arrives;
// the returned results carry one entry per host (or one for local and kube).
// A Runner must stop everything it started when ctx is done, and return only
// once it has.
type Runner interface {
	Run(ctx context.Context, job *Job, out Sink) ([]HostResult, error)
}

// Availability is implemented by runners whose target can be off for a
// while (the sandbox's, while it is down): Prepare refuses a block whose
// runner says why it cannot run now, before anything starts.
type Availability interface {
	Available() error
}

// Job is one block to run with everything resolved.
type Job struct {
	Runbook *runbook.Runbook
	Block   *runbook.Block
	// Env holds parameter and capture values by name. Runners pass them to
	// the command as environment variables (or, over SSH, as safely quoted
	// exports in the script preamble), never spliced into command text.
	Env map[string]string
	// Hosts are the resolved hosts for ssh blocks (from Env[Block.Hosts]).
	Hosts []string
	// From is the resolved source host of an ssh action=copy block ("" =
	// this machine).
	From string
	// RunID identifies the run (journal, CAIRN_RUN_ID).
	RunID string
	// Shell is the block's shell session (session=), or nil.
	Shell *ShellJob
}

// Sink receives a run's output and progress. Implementations must be safe
// for concurrent use: ssh runners report several hosts at once.
type Sink interface {
	// Output is a chunk of a host's combined stdout and stderr, in order.
	Output(host string, p []byte)
	// Event reports progress (a host started or finished, a retry).
	Event(ev Event)
}

// Event is a progress notice.
type Event struct {
	Kind    string // host-start, host-end, retry, info
	Host    string
	Message string
	Exit    int
	// A retry's parts, for a page to say Message in its own language.
	Attempt, Attempts int      `json:",omitempty"`
	Reasons           []string `json:",omitempty"` // why the attempt failed (redacted)
	Wait              string   `json:",omitempty"` // until the next attempt
}

// HostResult is how the block went on one host.
type HostResult struct {
	Host     string // "" for local; the host name for ssh; the context for kube
	Exit     int    // process exit status; -1 when it did not run or was killed
	Err      error  // transport or setup failure (cannot connect, host key refused, API error)
	Start    time.Time
	Duration time.Duration
	// Objects are what a native kube action returned (unstructured JSON
	// values), for jsonpath expectations and captures.
	Objects []any
	// Before are the same objects as first read, for checks over time
	// (expect.lease: was the Lease renewed while Cairn watched?).
	Before []any
}

// Sentinel errors.
var (
	ErrUnknownBlock   = errors.New("no such block in the loaded content")
	ErrHashMismatch   = errors.New("block hash does not match the loaded content")
	ErrNeedsConfirm   = errors.New("block needs confirmation")
	ErrBusy           = errors.New("another block of this runbook is running")
	ErrTooManyRuns    = errors.New("too many blocks are running")
	ErrNoRunner       = errors.New("no runner for this target")
	ErrContextRefused = errors.New("kube context not allowed by the runbook")
	ErrBadParam       = errors.New("invalid parameter")
	ErrConditionFalse = errors.New("block condition is false for these parameters")
	ErrManualBlock    = errors.New("manual blocks are done by a person")
	ErrTimeout        = errors.New("timed out")
	// ErrPermanent marks a failure that retrying cannot heal (a runner
	// wraps it: RBAC forbidden, an unknown resource type).
	ErrPermanent = errors.New("retrying cannot fix this")
)

// TargetOff says why a block's target is off (no cluster configured, the
// sandbox gone): its message is the reason alone, and errors.Is(err,
// ErrNoRunner) holds, so the API answers target_off. A context the runbook
// does not allow is ErrContextRefused instead: another fact, another fix.
func TargetOff(reason error) error { return targetOff{reason} }

type targetOff struct{ err error }

func (t targetOff) Error() string   { return t.err.Error() }
func (t targetOff) Unwrap() []error { return []error{t.err, ErrNoRunner} }

// BaseEnv is the environment a local command starts from: enough to find
// programs and a home, nothing of the daemon's own secrets.
func BaseEnv(lookup func(string) (string, bool)) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSH_AUTH_SOCK", "KUBECONFIG"} {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "TERM=dumb")
}
