package sandbox_test

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
)

// TestStatusInScope: a status taken for part of the sandbox probes only
// that part and counts only its problems. A host whose sshd is stopped
// (alive, never answering) holds up and fails a full status's probe; out
// of scope it is not dialled at all (no probe error) and the sandbox is
// healthy for a run on the other host. Once that sshd is dead, a status
// for every host (Hosts nil) or for the dead host fails.
func TestStatusInScope(t *testing.T) {
	sb := up(t, sandbox.Options{NoKube: true, Network: sandbox.NetworkLoopback, Hosts: []sandbox.HostSpec{{Name: "s0"}, {Name: "s1"}}})
	pid := hostPID(t, sb, "s1")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	comp := func(st sandbox.Status, name string) sandbox.ComponentStatus {
		i := slices.IndexFunc(st.Components, func(c sandbox.ComponentStatus) bool { return c.Name == name })
		if i < 0 {
			t.Fatalf("no component %s in %+v", name, st.Components)
		}
		return st.Components[i]
	}

	full := sb.Status(ctxT(t, 30*time.Second))
	if full.Healthy() || !strings.Contains(full.Summary(), "sshd-s1") {
		t.Fatalf("full status with s1's sshd stopped: %s", full.Summary())
	}
	one := sb.StatusIn(ctxT(t, 30*time.Second), &sandbox.Scope{Hosts: []string{"s0"}})
	if !one.Healthy() {
		t.Fatalf("status for s0 alone: %s", one.Summary())
	}
	if c := comp(one, "sshd-s1"); !c.Unprobed || !c.Healthy || c.Err != "" {
		t.Errorf("s1 out of scope: %+v, want unprobed, healthy (alive), no probe error", c)
	}
	if c := comp(one, "sshd-s0"); c.Unprobed || !c.Healthy {
		t.Errorf("s0 in scope: %+v, want probed and healthy", c)
	}
	if none := sb.StatusIn(ctxT(t, 30*time.Second), &sandbox.Scope{Hosts: []string{}}); !none.Healthy() {
		t.Errorf("status for no host: %s", none.Summary())
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stopped = false
	waitGone(t, pid)
	for _, sc := range []*sandbox.Scope{{Hosts: nil}, {Hosts: []string{"s1"}}} {
		if st := sb.StatusIn(ctxT(t, 30*time.Second), sc); st.Healthy() {
			t.Errorf("scope %+v with s1 dead: healthy", sc)
		}
	}
	one = sb.StatusIn(ctxT(t, 30*time.Second), &sandbox.Scope{Hosts: []string{"s0"}})
	if !one.Healthy() {
		t.Errorf("status for s0 with s1 dead: %s", one.Summary())
	}
	if c := comp(one, "sshd-s1"); c.Healthy {
		t.Errorf("dead s1 out of scope: %+v, want not healthy (listed, not a problem)", c)
	}
}
