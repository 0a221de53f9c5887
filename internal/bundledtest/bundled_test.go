package bundledtest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/executor/targets"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// These tests run real blocks of the bundled runbooks (content/*.md, as
// shipped) through the executor wired as `cairn serve` wires it, against the
// rig's kube-apiserver and sshd hosts, and check what the blocks did to the
// servers.

// bundled is one bundled runbook with an engine against the rig.
type bundled struct {
	rb     *runbook.Runbook
	eng    *executor.Engine
	params map[string]string // Request.Params of every run
}

// newBundled parses content/file and builds the executor as `cairn serve`
// does (targets.Open), its configuration pointing at the rig (k or s may be nil).
func newBundled(t *testing.T, file string, k *testrig.KubeEnv, s *testrig.SSHEnv, params map[string]string) *bundled {
	t.Helper()
	rb := bundledtest.Parse(t, file)
	dir := t.TempDir()
	cfg := targets.Config{Sandbox: "no", Journal: filepath.Join(dir, "journal.jsonl"), Kubeconfig: filepath.Join(dir, "no-kubeconfig"), Supervisor: local.SelfSupervisor()}
	if k != nil {
		cfg.Kubeconfig, cfg.Context = k.Kubeconfig, k.Context
	}
	if s != nil {
		cfg.SSHConfig, cfg.KnownHosts, cfg.Identity = s.Inventory.SSHConfig, s.Inventory.KnownHosts, []string{s.Inventory.IdentityFile}
	}
	x, err := targets.Open(context.Background(), cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	if k != nil && x.KubeErr != nil {
		t.Fatalf("kube runner: %v", x.KubeErr)
	}
	// These tests still play parts of the components the runbooks require
	// (kubeadm, helm, a CCM on the hosts): issues #11–#13 replace them with
	// the real binaries. Until then the requires check is off here only.
	x.Engine.CheckRequires = false
	return &bundled{rb: rb, eng: x.Engine, params: params}
}

// prepare asks the engine to run block id with the test's parameters, as the
// page would (quoting the block's hash).
func (b *bundled) prepare(t *testing.T, id string, confirmed bool) (*executor.Run, error) {
	t.Helper()
	blk := b.rb.BlockByID(id)
	if blk == nil {
		t.Fatalf("%s has no block %q", b.rb.Path, id)
	}
	return b.eng.Prepare(executor.Request{Runbook: b.rb, BlockID: id, Hash: blk.Hash, Params: b.params, Confirmed: confirmed})
}

// run prepares and executes block id within limit.
func (b *bundled) run(t *testing.T, id string, confirmed bool, limit time.Duration) *executor.Record {
	t.Helper()
	r, err := b.prepare(t, id, confirmed)
	if err != nil {
		t.Fatalf("prepare %s: %v", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return r.Execute(ctx, discardSink{})
}

// verify runs block id and fails t unless it is verified.
func (b *bundled) verify(t *testing.T, id string, confirmed bool) *executor.Record {
	t.Helper()
	rec := b.run(t, id, confirmed, 90*time.Second)
	if rec.Status != executor.StatusVerified {
		t.Fatalf("%s: %s after %.1fs: %q\noutput:\n%s", id, rec.Status, rec.Duration, rec.Reasons, rec.Output)
	}
	return rec
}

type discardSink struct{}

func (discardSink) Output(string, []byte) {}
func (discardSink) Event(executor.Event)  {}

const (
	kcmLockRole = "system::leader-locking-kube-controller-manager"
	kcmUser     = "system:kube-controller-manager"
)

// TestBundledCCMLeaseRBAC runs the leader-migration runbook's Lease RBAC
// steps against the real kube-system Role the apiserver's RBAC bootstrap
// creates, and its lease checks against Leases the test plays KCM for
// (the rig's controller manager runs with --leader-elect=false).
func TestBundledCCMLeaseRBAC(t *testing.T) {
	k := testrig.Kube(t)
	ctx := bundledtest.Ctx(t, 3*time.Minute)
	ccmRole := "cairn-test-ccm-lock-" + k.Namespace[len(k.Namespace)-6:]
	b := newBundled(t, "ccm-leader-migration.md", k, nil, map[string]string{"CCM_LEADER_ROLE": ccmRole})
	roles := k.Client.RbacV1().Roles("kube-system")

	// The bootstrap Role, restored afterwards (the apiserver reconciles it
	// only when it starts).
	orig, err := roles.Get(ctx, kcmLockRole, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Older releases' bootstrap: configmap locking only.
		orig, err = roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: kcmLockRole, Namespace: "kube-system"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"kube-controller-manager"}, Verbs: []string{"get", "update"}},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the RBAC bootstrap made no %s; created one", kcmLockRole)
		t.Cleanup(func() { _ = roles.Delete(context.Background(), kcmLockRole, metav1.DeleteOptions{}) })
	case err != nil:
		t.Fatal(err)
	default:
		t.Cleanup(func() {
			err := retryOnConflict(func() error {
				r, err := roles.Get(context.Background(), kcmLockRole, metav1.GetOptions{})
				if err != nil {
					return err
				}
				r.Rules = orig.Rules
				_, err = roles.Update(context.Background(), r, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Errorf("restore %s: %v", kcmLockRole, err)
			}
		})
	}
	t.Logf("%s before: %v", kcmLockRole, orig.Rules)
	otherBefore := canI(t, k, "get", "cairn-unrelated-lease")

	// The CCM's Role, as the provider's RBAC manifest would make it.
	if _, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: ccmRole}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"watch"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = roles.Delete(context.Background(), ccmRole, metav1.DeleteOptions{}) })

	t.Run("get-role", func(t *testing.T) {
		rec := b.verify(t, "get-kcm-lock-role", false)
		if !strings.Contains(rec.Output, "name: "+kcmLockRole) || !strings.Contains(rec.Output, "rules:") {
			t.Errorf("get-kcm-lock-role printed:\n%s", rec.Output)
		}
	})

	// The patching branch: the Role as older releases' bootstrap made it
	// (no lease rule at all), which today's apiserver never does, so
	// without this the branch would never run in a test (the audit).
	t.Run("patch-kcm-role-older-release", func(t *testing.T) {
		older := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"kube-controller-manager"}, Verbs: []string{"get", "update"}},
		}
		setRules := func(rules []rbacv1.PolicyRule) error {
			return retryOnConflict(func() error {
				r, err := roles.Get(context.Background(), kcmLockRole, metav1.GetOptions{})
				if err != nil {
					return err
				}
				r.Rules = rules
				_, err = roles.Update(context.Background(), r, metav1.UpdateOptions{})
				return err
			})
		}
		if err := setRules(older); err != nil {
			t.Fatal(err)
		}
		// Back to the bootstrap Role for the subtests below, however this
		// one ends (a skip too: it once left the older Role behind).
		t.Cleanup(func() {
			if err := setRules(orig.Rules); err != nil {
				t.Errorf("restore %s: %v", kcmLockRole, err)
			}
			waitCanI(t, k, "update", bundledtest.MigrationLease, true)
		})
		// The authorizer sees a Role change through its informer, a moment
		// later: until then it still answers from the bootstrap Role.
		if waitCanI(t, k, "update", bundledtest.MigrationLease, false) {
			t.Skipf("%s may update the migration lease without the Role's rule (another binding grants it): the patching branch cannot be reached here", kcmUser)
		}
		rec := b.verify(t, "patch-kcm-lock-role", true)
		r, err := roles.Get(ctx, kcmLockRole, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rec.Output, "role.rbac.authorization.k8s.io/"+kcmLockRole+" patched") ||
			len(r.Rules) != len(older)+1 || !reflect.DeepEqual(r.Rules[:len(older)], older) || !isMigrationRule(r.Rules[len(older):]) {
			t.Errorf("rules after the patch: %+v (before %+v)\n%s", r.Rules, older, rec.Output)
		}
		for _, verb := range []string{"get", "update"} {
			if !canI(t, k, verb, bundledtest.MigrationLease) {
				t.Errorf("%s may not %s lease %s after the patch", kcmUser, verb, bundledtest.MigrationLease)
			}
		}
		// Run again, it finds the access and changes nothing.
		if rec := b.verify(t, "patch-kcm-lock-role", true); !strings.Contains(rec.Output, "already granted") {
			t.Errorf("a second run did not find the access:\n%s", rec.Output)
		}
	})

	t.Run("patch-kcm-role", func(t *testing.T) {
		if _, err := b.prepare(t, "patch-kcm-lock-role", false); !errors.Is(err, executor.ErrNeedsConfirm) {
			t.Fatalf("unconfirmed patch: %v, want ErrNeedsConfirm", err)
		}
		granted := canI(t, k, "get", bundledtest.MigrationLease) && canI(t, k, "update", bundledtest.MigrationLease)
		rec := b.verify(t, "patch-kcm-lock-role", true)
		r, err := roles.Get(ctx, kcmLockRole, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if granted {
			// Today's bootstrap Role already grants every lease: left as it is.
			if !strings.Contains(rec.Output, "already granted") || !reflect.DeepEqual(r.Rules, orig.Rules) {
				t.Errorf("the Role was changed though it already granted the lease:\n%s\n%+v", rec.Output, r.Rules)
			}
		} else {
			// An older Role: one rule added, every earlier one kept.
			if !strings.Contains(rec.Output, "role.rbac.authorization.k8s.io/"+kcmLockRole+" patched") ||
				len(r.Rules) != len(orig.Rules)+1 || !reflect.DeepEqual(r.Rules[:len(orig.Rules)], orig.Rules) || !isMigrationRule(r.Rules[len(orig.Rules):]) {
				t.Errorf("rules after the patch: %+v (before %+v)\n%s", r.Rules, orig.Rules, rec.Output)
			}
		}
		for _, verb := range []string{"get", "update"} {
			if !canI(t, k, verb, bundledtest.MigrationLease) {
				t.Errorf("%s may not %s lease %s after the patch", kcmUser, verb, bundledtest.MigrationLease)
			}
		}
		if otherBefore != canI(t, k, "get", "cairn-unrelated-lease") {
			t.Errorf("%s's access to an unrelated lease changed", kcmUser)
		}
	})

	t.Run("can-i", func(t *testing.T) {
		rec := b.verify(t, "can-i-migration-lease", false)
		if rec.Output != "get: yes\nupdate: yes\n" {
			t.Errorf("can-i printed %q", rec.Output)
		}
	})

	t.Run("patch-ccm-role", func(t *testing.T) {
		if _, err := b.prepare(t, "patch-ccm-lock-role", false); !errors.Is(err, executor.ErrNeedsConfirm) {
			t.Fatalf("unconfirmed patch: %v, want ErrNeedsConfirm", err)
		}
		b.verify(t, "patch-ccm-lock-role", true)
		r, err := roles.Get(ctx, ccmRole, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The provider's rule stays; the migration rule is added after it.
		if len(r.Rules) != 2 || !slices.Equal(r.Rules[0].Resources, []string{"configmaps"}) || !isMigrationRule(r.Rules[1:]) {
			t.Errorf("%s rules after the patch: %+v", ccmRole, r.Rules)
		}
	})

	t.Run("leases", func(t *testing.T) {
		leases := k.Client.CoordinationV1().Leases("kube-system")
		if _, err := leases.Get(ctx, "cloud-controller-manager", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Skipf("kube-system already has a cloud-controller-manager Lease (%v)", err)
		}
		b.verify(t, "check-no-ccm-lease", false)

		// KCM's own lock and the migration lock, held the way a
		// leader-electing KCM holds them: client-go's leader election,
		// renewing. (Still the test, not a KCM: issue #11 brings the real one.)
		holder := "cp0_" + k.Namespace
		for _, name := range []string{"kube-controller-manager", bundledtest.MigrationLease} {
			if _, err := leases.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Skipf("kube-system already has a %s Lease (%v)", name, err)
			}
			t.Cleanup(func() { _ = leases.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
		stopKCM := holdLease(t, k, "kube-controller-manager", holder)
		if rec := b.verify(t, "check-kcm-lease", false); !strings.Contains(rec.Output, "holderIdentity: "+holder) || !strings.Contains(rec.Output, "renewed") {
			t.Errorf("check-kcm-lease printed:\n%s", rec.Output)
		}
		// The migration lock appears a moment after the check starts.
		stopMig := make(chan func(), 1)
		go func() {
			time.Sleep(time.Second)
			stopMig <- holdLease(t, k, bundledtest.MigrationLease, holder)
		}()
		b.verify(t, "wait-migration-lease", false)
		if rec := b.verify(t, "check-owner-kcm", false); !strings.Contains(rec.Output, bundledtest.MigrationLease+": "+holder) {
			t.Errorf("check-owner-kcm printed:\n%s", rec.Output)
		}
		// KCM killed: its name stays in both Leases, and the checks fail.
		stopKCM()
		(<-stopMig)()
		rec := b.run(t, "check-kcm-lease", false, time.Minute)
		if rec.Status == executor.StatusVerified || !regexp.MustCompile(`did not renew|stopped renewing`).MatchString(strings.Join(rec.Reasons, " ")) {
			t.Errorf("check-kcm-lease passed a dead holder: %s %q", rec.Status, rec.Reasons)
		}
	})
}

// holdLease holds kube-system/name as identity with client-go's leader
// election (what controller managers run) until the returned stop, which
// stops renewing without releasing, as a killed process would.
func holdLease(t *testing.T, k *testrig.KubeEnv, name, identity string) func() {
	t.Helper()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "kube-system", name, k.Client.CoreV1(), k.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leading, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(leading) }, OnStoppedLeading: func() {}},
		})
	}()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatalf("could not take lease %s", name)
	}
	return stop
}

// isMigrationRule reports whether rules are exactly the runbook's one rule
// for the migration Lease.
func isMigrationRule(rules []rbacv1.PolicyRule) bool {
	if len(rules) != 1 {
		return false
	}
	r := rules[0]
	return slices.Equal(r.APIGroups, []string{"coordination.k8s.io"}) && slices.Equal(r.Resources, []string{"leases"}) &&
		slices.Equal(r.ResourceNames, []string{bundledtest.MigrationLease}) && slices.Equal(r.Verbs, []string{"create", "list", "get", "update"})
}

// canI asks the apiserver (a SubjectAccessReview) whether KCM's user may
// verb the kube-system lease name.
func canI(t *testing.T, k *testrig.KubeEnv, verb, name string) bool {
	t.Helper()
	return canIAs(t, k, kcmUser, verb, name)
}

// canIAs asks the apiserver whether user may verb the kube-system Lease name.
func canIAs(t *testing.T, k *testrig.KubeEnv, user, verb, name string) bool {
	t.Helper()
	sar, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(bundledtest.Ctx(t, 20*time.Second), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "kube-system", Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// waitCanI waits (at most 10 s) until kube-controller-manager's access to
// lease name for verb is want, and returns the access it has then: RBAC
// changes reach the authorizer through an informer, not at once.
func waitCanI(t *testing.T, k *testrig.KubeEnv, verb, name string, want bool) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := canI(t, k, verb, name)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func retryOnConflict(f func() error) error {
	var err error
	for range 5 {
		if err = f(); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

var (
	ciliumNodes = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnodes"}
	ciliumPools = schema.GroupVersionResource{Group: "cilium.io", Version: "v2alpha1", Resource: "ciliumpodippools"}
	crds        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// The files of the kubeadm runbook's certificate distribution.
var (
	sharedCerts = []string{"ca.crt", "ca.key", "sa.key", "sa.pub", "front-proxy-ca.crt", "front-proxy-ca.key", "etcd/ca.crt"}
	etcdCAKey   = "etcd/ca.key"
	etcdClient  = []string{"apiserver-etcd-client.crt", "apiserver-etcd-client.key"}
)

// TestBundledKubeadmCertCopy runs the kubeadm runbook's manual certificate
// distribution over SSH: from cp0's private /etc/kubernetes/pki to cp1 and
// cp2, checked on each host (content and mode), cp0's originals intact and
// this machine's /etc/kubernetes untouched.
func TestBundledKubeadmCertCopy(t *testing.T) {
	r := newKubeadmRig(t)
	s := r.s
	hostPKI := pathState(t, "/etc/kubernetes/pki")
	params := r.params("CERT_DISTRIBUTION", "copy", "ETCD_TOPOLOGY", "stacked")
	b := newBundled(t, "kubeadm-ha.md", r.k, s, params)
	targets := []string{"cp1", "cp2"}
	all := append(append(slices.Clone(sharedCerts), etcdCAKey), etcdClient...)
	clean := func() {
		for _, h := range targets {
			s.Run(t, h, "rm -rf /etc/kubernetes/pki /etc/kubernetes/tmp")
		}
	}
	clean()
	t.Cleanup(clean)

	// The source is cp0's PKI as kubeadm generated it (kubeadm init phase
	// certs all, the sandbox's control plane's own): certificates 0644,
	// keys 0600.
	src := fileStates(t, s, "cp0", all)
	for _, f := range all {
		if src[f] == "absent" {
			t.Fatalf("cp0 has no /etc/kubernetes/pki/%s", f)
		}
	}

	t.Run("copy-shared-certs", func(t *testing.T) {
		b.verify(t, "prepare-pki-dirs", false)
		rec := b.verify(t, "copy-shared-certs", false)
		if len(rec.Hosts) != 2 || rec.Hosts[0].Host != "cp1" || rec.Hosts[1].Host != "cp2" {
			t.Fatalf("copy ran on %+v", rec.Hosts)
		}
		for _, h := range targets {
			got := fileStates(t, s, h, all)
			for _, f := range sharedCerts {
				if got[f] != src[f] {
					t.Errorf("%s:/etc/kubernetes/pki/%s is %q, cp0's is %q", h, f, got[f], src[f])
				}
				if !strings.Contains(rec.Output, fmt.Sprintf("copied cp0:/etc/kubernetes/pki/%s -> %s:/etc/kubernetes/pki/%s", f, h, f)) {
					t.Errorf("copy output lacks %s on %s:\n%s", f, h, rec.Output)
				}
			}
			// Only the listed files: the etcd CA key and the etcd client
			// certificate have steps of their own.
			for _, f := range append([]string{etcdCAKey}, etcdClient...) {
				if got[f] != "absent" {
					t.Errorf("%s:/etc/kubernetes/pki/%s was copied too (%s)", h, f, got[f])
				}
			}
		}
	})

	t.Run("copy-etcd-ca-key", func(t *testing.T) {
		b.verify(t, "copy-etcd-ca-key", false)
		for _, h := range targets {
			if got := fileStates(t, s, h, []string{etcdCAKey}); got[etcdCAKey] != src[etcdCAKey] {
				t.Errorf("%s:%s is %q, cp0's is %q", h, etcdCAKey, got[etcdCAKey], src[etcdCAKey])
			}
		}
		// With external etcd the key is not copied: the block's condition
		// is false, and the client certificate is copied instead.
		b.params["ETCD_TOPOLOGY"] = "external"
		defer func() { b.params["ETCD_TOPOLOGY"] = "stacked" }()
		if _, err := b.prepare(t, "copy-etcd-ca-key", false); !errors.Is(err, executor.ErrConditionFalse) {
			t.Errorf("copy-etcd-ca-key with external etcd: %v, want ErrConditionFalse", err)
		}
		b.verify(t, "copy-etcd-client-cert", false)
		for _, h := range targets {
			got := fileStates(t, s, h, etcdClient)
			for _, f := range etcdClient {
				if got[f] != src[f] {
					t.Errorf("%s:%s is %q, cp0's is %q", h, f, got[f], src[f])
				}
			}
		}
	})

	t.Run("secure-copied-keys", func(t *testing.T) {
		b.verify(t, "secure-copied-keys", false)
		for _, h := range targets {
			if out := s.Run(t, h, `find /etc/kubernetes/pki -name '*.key' ! -perm 0600`); out != "" {
				t.Errorf("%s: keys not 0600 after secure-copied-keys: %s", h, out)
			}
		}
	})

	// The copies are what kubeadm needs. The runbook's manual join block
	// runs (dry-run: kubeadm then makes a throwaway CA of its own in its
	// dry-run directory, so it proves discovery, not the copy); the
	// copy itself is proven by kubeadm's own certificate phase of a
	// control-plane join, run for real on cp1 by the test: it signs cp1's
	// serving certificates with the copied CA and keeps the CA as copied.
	t.Run("join-with-copied-certs", func(t *testing.T) {
		token := strings.TrimSpace(r.onHost(t, r.cp0, "kubeadm token create --ttl 10m"))
		j := newBundled(t, "kubeadm-ha.md", r.k, s, r.params("CERT_DISTRIBUTION", "copy", "CONTROL_PLANE_HOSTS", "cp1"))
		j.eng.SetCaptures(j.rb, map[string]string{"KUBEADM_VERSION": sandbox.KubeVersion, "JOIN_TOKEN": token, "CA_CERT_HASH": r.caHash(t)})
		rec := j.verify(t, "join-control-plane-manual", true)
		if strings.Contains(rec.Output, "Downloading the certificates") {
			t.Errorf("the manual join downloaded certificates:\n%s", rec.Output)
		}
		r.onHost(t, "cp1", fmt.Sprintf("kubeadm join phase control-plane-prepare certs %s --token %s --discovery-token-ca-cert-hash %s --control-plane >/dev/null",
			r.lb.Endpoint(), token, r.caHash(t)))
		if out := r.onHost(t, "cp1", "openssl verify -CAfile /etc/kubernetes/pki/ca.crt /etc/kubernetes/pki/apiserver.crt"); !strings.Contains(out, ": OK") {
			t.Errorf("cp1's new apiserver certificate does not chain to the copied CA: %s", out)
		}
		if got := fileStates(t, s, "cp1", sharedCerts); !maps.Equal(got, fileStates(t, s, "cp0", sharedCerts)) {
			t.Errorf("kubeadm replaced copied files on cp1:\n%v", got)
		}
	})

	// cp0's originals are intact; this machine's /etc/kubernetes is not
	// touched.
	if got := fileStates(t, s, "cp0", all); !maps.Equal(got, src) {
		t.Errorf("cp0's files changed:\n%v\nwas\n%v", got, src)
	}
	if got := pathState(t, "/etc/kubernetes/pki"); got != hostPKI {
		t.Errorf("this machine's /etc/kubernetes/pki: %s, was %s", got, hostPKI)
	}
}

// fileStates returns "MODE SHA256" (or "absent") of each file under host's
// /etc/kubernetes/pki, read over SSH.
func fileStates(t *testing.T, s *testrig.SSHEnv, host string, files []string) map[string]string {
	t.Helper()
	out := s.Run(t, host, `cd /etc/kubernetes/pki 2>/dev/null || exit 0
for f in `+strings.Join(files, " ")+`; do
  if [ -f "$f" ]; then echo "$f $(stat -c %a "$f") $(sha256sum < "$f" | cut -d' ' -f1)"; fi
done`)
	got := map[string]string{}
	for _, f := range files {
		got[f] = "absent"
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f, rest, ok := strings.Cut(line, " "); ok {
			got[f] = rest
		}
	}
	return got
}

// pathState describes path on this machine: absent, or its entries.
func pathState(t *testing.T, path string) string {
	t.Helper()
	ents, err := os.ReadDir(path)
	if os.IsNotExist(err) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return fmt.Sprint(names)
}

// TestBundledCiliumNoFalseGreens: on a cluster without Cilium (the sandbox,
// once the CRDs of the other Cilium test are gone), the blocks that loop
// over agents, nodes and test pods must fail, not verify on empty output
// (the review found restart-remaining-agents and check-all-agents-multipool
// verified there).
func TestBundledCiliumNoFalseGreens(t *testing.T) {
	k := testrig.Kube(t)
	ctx := bundledtest.Ctx(t, 2*time.Minute)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := k.Dynamic.Resource(crds).Get(ctx, "ciliumnodes.cilium.io", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the CiliumNode CRD of another test did not go away: %v", err)
	}
	b := newBundled(t, "cilium-multipool.md", k, nil, map[string]string{
		"CILIUM_VERSION":   "1.18.4",
		"CILIUM_NAMESPACE": k.Namespace, // no agents here
		"TEST_NAMESPACE":   k.Namespace, // no test pods either
	})
	for _, id := range []string{"restart-remaining-agents", "check-all-agents-multipool", "check-connectivity-mixed", "check-connectivity-final"} {
		b.rb.BlockByID(id).Retries = 0 // the verdict, not the waiting, is under test
		rec := b.run(t, id, true, 60*time.Second)
		if rec.Status == executor.StatusVerified {
			t.Errorf("%s verified on a cluster without Cilium; output:\n%s", id, rec.Output)
		} else {
			t.Logf("%s: %s: %s", id, rec.Status, strings.Join(rec.Reasons, "; "))
		}
	}
}
