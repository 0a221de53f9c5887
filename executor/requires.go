package executor

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/runbook"
)

// ErrRequirements: what the runbook's front matter requires (binaries on
// this machine or on its hosts, API resources of the cluster) is missing.
var ErrRequirements = errors.New("requirements not met")

// ResourceChecker is implemented by the kube runner: which of the API
// resources (plural.group) the cluster does not serve.
type ResourceChecker interface {
	MissingResources(ctx context.Context, rb *runbook.Runbook, names []string) ([]string, error)
}

// requiresTimeout bounds the whole check (SSH connects, discovery).
const requiresTimeout = 30 * time.Second

// requiresScript lists which of $CAIRN_REQUIRED (validated command names,
// passed as data) a host lacks.
const requiresScript = `missing=""
for b in $CAIRN_REQUIRED; do command -v "$b" >/dev/null 2>&1 || missing="$missing $b"; done
echo "missing:$missing"
`

// Requirements checks rb's requires against this machine, the hosts the
// host parameters in params name, and the kube context, and returns one
// error naming everything missing (wrapping ErrRequirements), or nil.
func (e *Engine) Requirements(ctx context.Context, rb *runbook.Runbook, params map[string]string) error {
	req := rb.Meta.Requires
	if !req.Checked() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requiresTimeout)
	defer cancel()
	var problems []string
	var missing []string
	for _, b := range req.Binaries {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "not installed on this machine: "+strings.Join(missing, ", "))
	}
	for _, hr := range req.Hosts {
		problems = append(problems, e.checkHosts(ctx, rb, hr, params)...)
	}
	if len(req.Resources) > 0 {
		rc, ok := e.Runners[RunnerKube].(ResourceChecker)
		var err error
		if a, isA := e.Runners[RunnerKube].(Availability); isA {
			err = a.Available()
		}
		switch {
		case !ok:
			problems = append(problems, "cannot check the API resources "+strings.Join(req.Resources, ", ")+": no kube runner")
		case err != nil:
			problems = append(problems, "cannot check the API resources "+strings.Join(req.Resources, ", ")+": "+err.Error())
		default:
			gone, err := rc.MissingResources(ctx, rb, req.Resources)
			if err != nil {
				problems = append(problems, "cannot check the API resources: "+err.Error())
			} else if len(gone) > 0 {
				where := ""
				if e.KubeWhere != nil {
					if w, err := e.KubeWhere(rb); err == nil {
						where = " by " + w
					}
				}
				problems = append(problems, "API resources not served"+where+": "+strings.Join(gone, ", "))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (requires in %s's front matter; install them, or run against a cluster that has them)", ErrRequirements, strings.Join(problems, "; "), rb.Path)
}

// checkHosts runs requiresScript on the hosts of one requires.hosts entry.
func (e *Engine) checkHosts(ctx context.Context, rb *runbook.Runbook, hr runbook.HostRequire, params map[string]string) []string {
	hosts := runbook.SplitHosts(params[hr.Param])
	if len(hosts) == 0 {
		return []string{fmt.Sprintf("%s names no host to check for %s", hr.Param, strings.Join(hr.Binaries, ", "))}
	}
	r := e.Runners[RunnerSSH]
	if r == nil {
		return []string{"cannot check " + hr.Param + ": no ssh runner"}
	}
	if a, ok := r.(Availability); ok {
		if err := a.Available(); err != nil {
			return []string{"cannot check " + hr.Param + ": " + err.Error()}
		}
	}
	blk := &runbook.Block{ID: "requires", Target: runbook.TargetSSH, Hosts: hr.Param, Content: requiresScript,
		Timeout: requiresTimeout, Parallel: len(hosts)}
	job := &Job{Runbook: rb, Block: blk, Env: map[string]string{"CAIRN_REQUIRED": strings.Join(hr.Binaries, " ")}, Hosts: hosts, RunID: NewID()}
	sink := &collect{out: map[string]*strings.Builder{}}
	results, err := r.Run(ctx, job, sink)
	if err != nil {
		return []string{"cannot check " + hr.Param + ": " + err.Error()}
	}
	var problems []string
	for _, h := range results {
		out := sink.get(h.Host)
		switch {
		case h.Err != nil:
			problems = append(problems, fmt.Sprintf("%s: cannot check %s: %v", h.Host, strings.Join(hr.Binaries, ", "), h.Err))
		case !strings.Contains(out, "missing:"):
			problems = append(problems, fmt.Sprintf("%s: cannot check %s (exit %d)", h.Host, strings.Join(hr.Binaries, ", "), h.Exit))
		default:
			line := out[strings.LastIndex(out, "missing:")+len("missing:"):]
			if i := strings.IndexByte(line, '\n'); i >= 0 {
				line = line[:i]
			}
			if f := strings.Fields(line); len(f) > 0 {
				problems = append(problems, fmt.Sprintf("not installed on %s: %s", h.Host, strings.Join(f, ", ")))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// collect keeps each host's output.
type collect struct {
	mu  sync.Mutex
	out map[string]*strings.Builder
}

func (c *collect) Output(host string, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.out[host]
	if b == nil {
		b = &strings.Builder{}
		c.out[host] = b
	}
	if b.Len() < 64<<10 {
		b.Write(p)
	}
}

func (c *collect) Event(Event) {}

func (c *collect) get(host string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.out[host]; b != nil {
		return b.String()
	}
	return ""
}
