package bundledtest_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// controllerManager is a real kube-controller-manager-n or
// cloud-controller-manager, a component of the rig's sandbox (started,
// probed on /healthz and stopped by the sandbox like its own servers), its
// log in the sandbox's logs directory.
type controllerManager struct {
	t    *testing.T
	sb   *sandbox.Sandbox
	name string
	log  string
	gone bool
}

// startCM adds bin as component name to the rig's sandbox, authenticated as
// user, with Leader Migration on, the fake cloud provider, and leader
// election timings short enough for a test (6 s leases, renewed every
// second).
func startCM(t *testing.T, k *testrig.KubeEnv, bin, user, config, name string, extra ...string) *controllerManager {
	t.Helper()
	args := append([]string{"--leader-elect=true", "--cloud-provider=fake",
		"--enable-leader-migration", "--leader-migration-config=" + config,
		"--allocate-node-cidrs", "--cluster-cidr=10.96.0.0/12", "--configure-cloud-routes=true",
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s", "-v=2"}, extra...)
	cm := &controllerManager{t: t, sb: k.Sandbox, name: name, log: filepath.Join(k.Sandbox.Dir(), "logs", name+".log")}
	_ = os.Remove(cm.log) // a name reused by -count=N starts a fresh log
	if err := k.Sandbox.Add(bundledtest.Ctx(t, 2*time.Minute), &sandbox.ControllerManager{ComponentName: name, Bin: bin, User: user, Args: args}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cm.kill()
		if t.Failed() {
			t.Logf("%s (last lines):\n%s", name, bundledtest.Tail(cm.text(), 25))
		}
	})
	return cm
}

// kill stops the process the way a crash or a node loss does: SIGKILL, no
// lease released.
func (c *controllerManager) kill() {
	if !c.gone {
		c.gone = true
		if err := c.sb.Remove(context.Background(), c.name, true); err != nil {
			c.t.Errorf("kill %s: %v", c.name, err)
		}
	}
}

func (c *controllerManager) text() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

// waitLog waits (bounded) until the log matches re.
func (c *controllerManager) waitLog(t *testing.T, re string, within time.Duration) {
	t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(within); !rx.MatchString(c.text()); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q within %s:\n%s", filepath.Base(c.log), re, within, bundledtest.Tail(c.text(), 30))
		}
	}
}

// startedBeforeMigrationLock lists the cloud controllers the log shows
// starting before the process held the migration lease: controllers that
// run under a component's own lock, alongside the other side's.
func startedBeforeMigrationLock(log string) []string {
	cut := strings.Index(log, "leader migration: starting migrated controllers")
	if cut < 0 {
		cut = len(log)
	}
	var out []string
	for _, c := range bundledtest.CloudControllers {
		if bundledtest.StartedRe(c).MatchString(log[:cut]) {
			out = append(out, c)
		}
	}
	return out
}

// TestBundledCCMHandover runs the leader-migration runbook's own blocks
// through the executor against a real kube-controller-manager v1.30.14
// ("version N") and a real cloud-controller-manager v1.37.2 ("N+1"), both
// with the fake cloud provider, on the sandbox's apiserver; the config file
// is written by the runbook's block over SSH on a sandbox host. The
// handover: KCM holds both leases; the CCM starts, takes its own lease and
// waits; killing KCM hands the migration lease to the CCM within the lease
// duration, and only then does it start the cloud controllers; the lease
// checks fail on the dead holder. With the old controller names (legacy)
// the CCM starts the cloud controllers at once, under its own lock, while
// KCM runs them too: the case the runbook used to allow.
func TestBundledCCMHandover(t *testing.T) {
	bundledtest.NeedSandboxBins(t, sandbox.BinKCMN, sandbox.BinCCM)
	k := testrig.Kube(t)
	s := testrig.SSH(t)
	ctx := bundledtest.Ctx(t, 10*time.Minute)
	leases := k.Client.CoordinationV1().Leases("kube-system")
	for _, name := range []string{"kube-controller-manager", bundledtest.MigrationLease, "cloud-controller-manager"} {
		if _, err := leases.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Skipf("kube-system already has a %s Lease (%v)", name, err)
		}
		t.Cleanup(func() { _ = leases.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	host := s.Inventory.Hosts[0].Name
	// The sandbox's hosts share /tmp with this machine: the file the
	// runbook's block writes on the host is the one the processes read.
	config := filepath.Join(t.TempDir(), "leadermigration.conf")
	params := map[string]string{"CONTROL_PLANE_HOSTS": host, "NEW_CONTROL_PLANE_HOSTS": host, "LEADER_MIGRATION_FILE": config,
		"LEADER_MIGRATION_CONFIG": "wildcard", "CONTROLLER_NAMES": "current", "DISABLE_LEADER_MIGRATION": "true",
		"CCM_USER": bundledtest.CCMUser}
	b := newBundled(t, "ccm-leader-migration.md", k, s, params)

	// Access to the migration lease, by the runbook's blocks: KCM's
	// bootstrap Role already grants it on this release (the block says so
	// and changes nothing); the CCM's Role, from the provider's manifest
	// (played by the test), gains the rule, and without it the CCM could
	// never take the lease: the handover below depends on the patch.
	bundledtest.ProviderRBAC(t, k.Client)
	if canIAs(t, k, bundledtest.CCMUser, "update", bundledtest.MigrationLease) {
		t.Fatalf("%s may update the migration lease before the runbook grants it", bundledtest.CCMUser)
	}
	b.verify(t, "get-kcm-lock-role", false)
	if rec := b.verify(t, "patch-kcm-lock-role", true); !strings.Contains(rec.Output, "already granted") {
		t.Logf("patch-kcm-lock-role changed the bootstrap Role:\n%s", rec.Output)
	}
	// The CCM's access, checked by the runbook before the patch: refused.
	if rec := b.run(t, "can-i-migration-lease-ccm", false, time.Minute); rec.Status == executor.StatusVerified {
		t.Errorf("can-i-migration-lease-ccm verified before the CCM's Role had the rule:\n%s", rec.Output)
	}
	b.verify(t, "patch-ccm-lock-role", true)
	b.verify(t, "can-i-migration-lease", false)
	b.verify(t, "can-i-migration-lease-ccm", false)
	if !canIAs(t, k, bundledtest.CCMUser, "update", bundledtest.MigrationLease) || !canIAs(t, k, bundledtest.CCMUser, "update", "cloud-controller-manager") {
		t.Fatalf("after patch-ccm-lock-role %s cannot update both leases", bundledtest.CCMUser)
	}

	rec := b.verify(t, "write-kcm-config-wildcard", false)
	for _, c := range bundledtest.CloudControllers {
		if !strings.Contains(rec.Output, "name: "+c) {
			t.Fatalf("the written configuration lacks %s:\n%s", c, rec.Output)
		}
	}

	// Version N: KCM leader-elects with Leader Migration.
	kcm := startCM(t, k, sandbox.BinKCMN, kcmUser, config, "kcm-n", "--controllers=serviceaccount-token-controller,"+strings.Join(bundledtest.CloudControllers, ","))
	// The runbook starts with KCM running: wait until it leads.
	kcm.waitLog(t, `acquired lease kube-system/kube-controller-manager`, 30*time.Second)
	b.verify(t, "check-kcm-lease", false)
	b.verify(t, "wait-migration-lease", false)
	if rec := b.verify(t, "check-owner-kcm", false); !strings.Contains(rec.Output, "owner: kube-controller-manager") {
		t.Errorf("check-owner-kcm:\n%s", rec.Output)
	}
	kcm.waitLog(t, bundledtest.StartedRe("service-lb-controller").String(), 30*time.Second)
	if early := startedBeforeMigrationLock(kcm.text()); len(early) > 0 {
		t.Errorf("KCM started %v before it held the migration lease", early)
	}

	// Version N+1: the CCM joins, takes its own lease, and waits.
	b.verify(t, "write-ccm-config-wildcard", false)
	ccm := startCM(t, k, sandbox.BinCCM, bundledtest.CCMUser, config, "ccm")
	b.verify(t, "wait-ccm-lease", false)
	if rec := b.verify(t, "check-owner-mixed", false); !strings.Contains(rec.Output, "owner: kube-controller-manager") {
		t.Errorf("check-owner-mixed while KCM holds the lock:\n%s", rec.Output)
	}
	time.Sleep(3 * time.Second) // time enough for a wrongly configured CCM to start them
	if early := startedBeforeMigrationLock(ccm.text()); len(early) > 0 {
		t.Fatalf("the CCM started %v while KCM held the migration lease: the cloud controllers run twice", early)
	}

	// KCM dies (a node replaced): the CCM takes over within the lease
	// duration, and only then starts the cloud controllers.
	kcm.kill()
	killed := time.Now()
	if rec := b.verify(t, "check-owner-ccm", false); !strings.Contains(rec.Output, "owner: cloud-controller-manager") {
		t.Errorf("check-owner-ccm:\n%s", rec.Output)
	}
	ccm.waitLog(t, "leader migration: starting migrated controllers", 30*time.Second)
	if d := time.Since(killed); d > 40*time.Second {
		t.Errorf("the handover took %s", d)
	}
	ccm.waitLog(t, bundledtest.StartedRe("service-lb-controller").String(), 30*time.Second)
	if early := startedBeforeMigrationLock(ccm.text()); len(early) > 0 {
		t.Errorf("the CCM started %v before it held the migration lease", early)
	}
	// The dead KCM's name is still in its Lease: the live-lease check says so.
	if rec := b.run(t, "check-kcm-lease", false, time.Minute); rec.Status == executor.StatusVerified {
		t.Errorf("check-kcm-lease passed for the killed KCM:\n%s", rec.Output)
	}

	// Rollback: version N comes back and the CCM goes (a node rolled back);
	// the lease returns to KCM.
	kcm = startCM(t, k, sandbox.BinKCMN, kcmUser, config, "kcm-n-rollback", "--controllers=serviceaccount-token-controller,"+strings.Join(bundledtest.CloudControllers, ","))
	kcm.waitLog(t, `acquired lease kube-system/kube-controller-manager`, 30*time.Second)
	ccm.kill()
	rollback := newBundled(t, "ccm-leader-migration.md", k, s, map[string]string{"CONTROL_PLANE_HOSTS": host, "NEW_CONTROL_PLANE_HOSTS": host,
		"LEADER_MIGRATION_FILE": config, "LEADER_MIGRATION_CONFIG": "wildcard", "CONTROLLER_NAMES": "current", "ROLLBACK": "true"})
	if rec := rollback.verify(t, "check-owner-after-rollback", false); !strings.Contains(rec.Output, "owner: kube-controller-manager") {
		t.Errorf("check-owner-after-rollback:\n%s", rec.Output)
	}
	kcm.waitLog(t, "leader migration: starting migrated controllers", 30*time.Second)
	kcm.kill()

	// Turning Leader Migration off: the file and the migration lease go.
	b.verify(t, "remove-migration-config", true)
	if _, err := os.Stat(config); !os.IsNotExist(err) {
		t.Errorf("remove-migration-config left %s (%v)", config, err)
	}
	b.verify(t, "delete-migration-lease", true)
	if _, err := leases.Get(ctx, bundledtest.MigrationLease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the migration lease is still there (%v)", err)
	}

	// The "component named" tab: each side has its own file, KCM's naming
	// kube-controller-manager and the CCM's cloud-controller-manager for
	// every controller. The same handover: the CCM waits while KCM holds
	// the migration lease, then takes it over when KCM dies.
	t.Run("explicit-config", func(t *testing.T) {
		for _, name := range []string{"kube-controller-manager", bundledtest.MigrationLease, "cloud-controller-manager"} {
			_ = leases.Delete(ctx, name, metav1.DeleteOptions{})
		}
		kcmFile, ccmFile := filepath.Join(t.TempDir(), "kcm-leadermigration.conf"), filepath.Join(t.TempDir(), "ccm-leadermigration.conf")
		param := func(file string) map[string]string {
			return map[string]string{"CONTROL_PLANE_HOSTS": host, "NEW_CONTROL_PLANE_HOSTS": host, "LEADER_MIGRATION_FILE": file,
				"LEADER_MIGRATION_CONFIG": "explicit", "CONTROLLER_NAMES": "current", "DISABLE_LEADER_MIGRATION": "true"}
		}
		onKCM, onCCM := newBundled(t, "ccm-leader-migration.md", k, s, param(kcmFile)), newBundled(t, "ccm-leader-migration.md", k, s, param(ccmFile))
		if rec := onKCM.verify(t, "write-kcm-config-explicit", false); strings.Count(rec.Output, "component: kube-controller-manager") != 3 {
			t.Fatalf("write-kcm-config-explicit:\n%s", rec.Output)
		}
		if rec := onCCM.verify(t, "write-ccm-config-explicit", false); strings.Count(rec.Output, "component: cloud-controller-manager") != 3 {
			t.Fatalf("write-ccm-config-explicit:\n%s", rec.Output)
		}
		kcm := startCM(t, k, sandbox.BinKCMN, kcmUser, kcmFile, "kcm-n-explicit", "--controllers=serviceaccount-token-controller,"+strings.Join(bundledtest.CloudControllers, ","))
		onKCM.verify(t, "wait-migration-lease", false)
		kcm.waitLog(t, bundledtest.StartedRe("service-lb-controller").String(), 30*time.Second)
		ccm := startCM(t, k, sandbox.BinCCM, bundledtest.CCMUser, ccmFile, "ccm-explicit")
		onCCM.verify(t, "wait-ccm-lease", false)
		time.Sleep(3 * time.Second)
		if early := startedBeforeMigrationLock(ccm.text()); len(early) > 0 {
			t.Fatalf("the CCM started %v while KCM held the migration lease", early)
		}
		kcm.kill()
		if rec := onCCM.verify(t, "check-owner-ccm", false); !strings.Contains(rec.Output, "owner: cloud-controller-manager") {
			t.Errorf("check-owner-ccm:\n%s", rec.Output)
		}
		ccm.waitLog(t, bundledtest.StartedRe("service-lb-controller").String(), 30*time.Second)
		if early := startedBeforeMigrationLock(ccm.text()); len(early) > 0 {
			t.Errorf("the CCM started %v before it held the migration lease", early)
		}
		ccm.kill()
	})

	// The old names: the CCM does not recognise them as its controllers'
	// and starts those under its own lock at once, beside the KCM.
	t.Run("legacy-names-run-twice", func(t *testing.T) {
		for _, name := range []string{"kube-controller-manager", bundledtest.MigrationLease, "cloud-controller-manager"} {
			_ = leases.Delete(ctx, name, metav1.DeleteOptions{})
		}
		legacy := newBundled(t, "ccm-leader-migration.md", k, s, map[string]string{"CONTROL_PLANE_HOSTS": host, "NEW_CONTROL_PLANE_HOSTS": host,
			"LEADER_MIGRATION_FILE": config, "LEADER_MIGRATION_CONFIG": "wildcard", "CONTROLLER_NAMES": "legacy", "DISABLE_LEADER_MIGRATION": "true"})
		legacy.verify(t, "write-ccm-config-wildcard", false)
		kcm := startCM(t, k, sandbox.BinKCMN, kcmUser, config, "kcm-n-legacy", "--controllers=serviceaccount-token-controller,"+strings.Join(bundledtest.CloudControllers, ","))
		kcm.waitLog(t, bundledtest.StartedRe("service-lb-controller").String(), 30*time.Second)
		ccm := startCM(t, k, sandbox.BinCCM, bundledtest.CCMUser, config, "ccm-legacy")
		ccm.waitLog(t, bundledtest.StartedRe("service-lb-controller").String(), 30*time.Second)
		if len(startedBeforeMigrationLock(kcm.text())) == 0 || len(startedBeforeMigrationLock(ccm.text())) == 0 {
			t.Errorf("with legacy names both sides should run the cloud controllers under their own locks; KCM early %v, CCM early %v",
				startedBeforeMigrationLock(kcm.text()), startedBeforeMigrationLock(ccm.text()))
		}
		legacy.verify(t, "remove-migration-config", true)
	})
}
