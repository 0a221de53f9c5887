package bundledtest_test

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// kubeadmRig is the kubeadm runbook against the full sandbox: the control
// plane on cp0 with kubeadm's PKI, haproxy in front of it as
// lb.cairn.internal, the hosts' kubeadm v1.37.2 (init and join in dry-run:
// no kubelet yet, see sandbox.KubeadmDryRun).
type kubeadmRig struct {
	k   *testrig.KubeEnv
	s   *testrig.SSHEnv
	sb  *sandbox.Sandbox
	lb  *sandbox.LBInfo
	cp0 string
}

func newKubeadmRig(t *testing.T) *kubeadmRig {
	t.Helper()
	bundledtest.NeedSandboxBins(t)
	k, s := testrig.Full(t)
	if s.Inventory.Mode != sandbox.NetworkNamespaces {
		t.Skip("the kubeadm runbook needs hosts with their own /etc/kubernetes (netns mode, root)")
	}
	return &kubeadmRig{k: k, s: s, sb: k.Sandbox, lb: k.Sandbox.LoadBalancer(), cp0: s.Inventory.Hosts[0].Name}
}

// params are the runbook's parameters for the sandbox: the load balancer's
// real name and port, cp0 first, cp1 and cp2 joining, w0 the worker.
func (r *kubeadmRig) params(extra ...string) map[string]string {
	p := map[string]string{
		"LOAD_BALANCER_DNS": r.lb.Name, "LOAD_BALANCER_PORT": strconv.Itoa(r.lb.Port),
		"FIRST_CP": "cp0", "CONTROL_PLANE_HOSTS": "cp1 cp2", "WORKER_HOSTS": "w0",
		"ETCD_TOPOLOGY": "stacked", "CERT_DISTRIBUTION": "upload", "REFRESH_JOIN": "true",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return p
}

// caHash is kubeadm's --discovery-token-ca-cert-hash of the sandbox CA.
func (r *kubeadmRig) caHash(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.sb.Dir(), "kube", "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// onHost runs cmd on host as root and returns its output.
func (r *kubeadmRig) onHost(t *testing.T, host, cmd string) string {
	t.Helper()
	return r.s.Run(t, host, "sudo -n sh -c "+runbook.ShellWord(cmd))
}

// TestBundledKubeadmLoadBalancerCheck runs check-lb with real nc against
// the sandbox's real haproxy in the three outcomes the runbook describes:
// the load balancer forwards to a live apiserver (succeeded); nothing
// listens on the port (refused: "expected" before the first apiserver
// runs); the traffic is dropped (a misconfigured load balancer or
// firewall): nc times out and the block fails.
func TestBundledKubeadmLoadBalancerCheck(t *testing.T) {
	r := newKubeadmRig(t)
	if _, err := exec.LookPath("nc"); err != nil {
		t.Fatalf("nc: %v (scripts/ci-deps.sh installs netcat-openbsd)", err)
	}
	t.Run("succeeded", func(t *testing.T) {
		b := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params())
		if rec := b.verify(t, "check-lb", false); !strings.Contains(rec.Output, "succeeded") {
			t.Errorf("check-lb through haproxy:\n%s", rec.Output)
		}
	})
	t.Run("refused", func(t *testing.T) {
		port, err := freeTCPPort()
		if err != nil {
			t.Fatal(err)
		}
		b := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params("LOAD_BALANCER_PORT", strconv.Itoa(port)))
		if rec := b.verify(t, "check-lb", false); !strings.Contains(rec.Output, "refused") {
			t.Errorf("check-lb on a port nothing listens on:\n%s", rec.Output)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		nft, err := exec.LookPath("nft")
		if err != nil {
			t.Fatalf("nft: %v (scripts/ci-deps.sh installs nftables)", err)
		}
		// A table of this test's own on this machine, dropping the load
		// balancer's port; deleted at cleanup.
		table := fmt.Sprintf("cairn_test_%d", os.Getpid())
		rules := fmt.Sprintf("table inet %[1]s {\n chain in {\n  type filter hook input priority -10; policy accept;\n  tcp dport %[2]d drop\n }\n}\n", table, r.lb.Port)
		cmd := exec.Command(nft, "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft: %v: %s", err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command(nft, "delete", "table", "inet", table).CombinedOutput(); err != nil {
				t.Errorf("nft delete table %s: %v: %s", table, err, out)
			}
		})
		b := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params())
		rec := b.run(t, "check-lb", false, time.Minute)
		if rec.Status == executor.StatusVerified || !strings.Contains(rec.Output, "timed out") {
			t.Errorf("check-lb with the traffic dropped: %s %q\n%s", rec.Status, rec.Reasons, rec.Output)
		}
	})
}

// TestBundledKubeadmInitAndJoin runs the runbook's init, refresh and join
// blocks on the sandbox's hosts with the real kubeadm: init in dry-run for
// each topology and certificate path (every capture and expected-output
// template against real output), the refresh blocks for real against the
// cluster, and the joins in dry-run with the captured values, where kubeadm
// really discovers the cluster through the load balancer with the token and
// CA hash and really downloads and decrypts kubeadm-certs with the key.
func TestBundledKubeadmInitAndJoin(t *testing.T) {
	r := newKubeadmRig(t)
	wantHash := r.caHash(t)
	// The version checks ask kubeadm and kubelet on every host (both built
	// from the sandbox's release); the first captures KUBEADM_VERSION.
	vb := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params())
	if rec := vb.verify(t, "check-versions-first-cp", false); !strings.Contains(rec.Output, "Kubernetes "+sandbox.KubeVersion) {
		t.Errorf("check-versions-first-cp:\n%s", rec.Output)
	}
	version := vb.eng.Captures(vb.rb)["KUBEADM_VERSION"]
	if version != sandbox.KubeVersion {
		t.Fatalf("KUBEADM_VERSION captured %q, want %s", version, sandbox.KubeVersion)
	}
	vb.verify(t, "check-versions-other-nodes-cp", false)
	vb.verify(t, "check-versions-workers", false)
	seed := func(b *bundled) { b.eng.SetCaptures(b.rb, map[string]string{"KUBEADM_VERSION": version}) }

	// POD_NETWORK_CIDR is optional (only some CNIs want it): set, kubeadm
	// gets it and the controller manager would allocate node CIDRs from it;
	// empty, kubeadm never hears of it.
	for _, tc := range []struct {
		block, dist, topo, podCIDR string
		wantKey                    bool
	}{
		{"init-stacked", "upload", "stacked", "10.244.0.0/16", true},
		{"init-stacked-no-upload", "copy", "stacked", "", false},
		{"init-external", "upload", "external", "10.32.0.0/12", true},
		{"init-external-no-upload", "scp", "external", "", false},
	} {
		t.Run(tc.block, func(t *testing.T) {
			b := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params("CERT_DISTRIBUTION", tc.dist, "ETCD_TOPOLOGY", tc.topo,
				"ETCD_0_IP", "cp1", "ETCD_1_IP", "cp2", "ETCD_2_IP", "w0", "POD_NETWORK_CIDR", tc.podCIDR))
			seed(b)
			if tc.topo == "external" {
				rec := b.verify(t, "write-kubeadm-config", true)
				if got := r.onHost(t, r.cp0, "cat /etc/kubernetes/kubeadm-config.yaml"); !strings.Contains(got, "controlPlaneEndpoint: \""+r.lb.Endpoint()+"\"") {
					t.Errorf("kubeadm-config.yaml:\n%s\nblock output:\n%s", got, rec.Output)
				}
			}
			if _, err := b.prepare(t, tc.block, false); err == nil {
				t.Fatalf("%s ran without confirmation", tc.block)
			}
			rec := b.verify(t, tc.block, true)
			if !strings.Contains(rec.Output, "--dry-run") {
				t.Errorf("%s: the output does not say kubeadm ran in dry-run:\n%s", tc.block, rec.Output)
			}
			if has := strings.Contains(rec.Output, "--cluster-cidr="); has != (tc.podCIDR != "") ||
				tc.podCIDR != "" && !strings.Contains(rec.Output, "--cluster-cidr="+tc.podCIDR) {
				t.Errorf("%s with POD_NETWORK_CIDR %q: the controller manager's manifest has --cluster-cidr: %v", tc.block, tc.podCIDR, has)
			}
			caps := b.eng.Captures(b.rb)
			if caps["CA_CERT_HASH"] != wantHash {
				t.Errorf("CA_CERT_HASH %q, want %q (the sandbox CA's)", caps["CA_CERT_HASH"], wantHash)
			}
			if caps["JOIN_TOKEN"] == "" || (caps["CERT_KEY"] != "") != tc.wantKey {
				t.Errorf("captures %v (want a certificate key: %v)", keys(caps), tc.wantKey)
			}
			// Secrets never reach the record.
			if m := leakedSecret.FindString(rec.Output); m != "" {
				t.Errorf("a secret is in the recorded output: %q", m)
			}
		})
	}

	// The real refresh: a bootstrap token and kubeadm-certs in the cluster.
	b := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params())
	seed(b)
	b.verify(t, "check-lb-readyz", false)
	b.verify(t, "refresh-token", false)
	b.verify(t, "refresh-cert-key-stacked", false)
	caps := b.eng.Captures(b.rb)
	if caps["CA_CERT_HASH"] != wantHash || caps["CERT_KEY"] != executor.Mask || caps["JOIN_TOKEN"] != executor.Mask {
		t.Fatalf("refresh captures: %v", caps)
	}
	// refresh-token made a bootstrap token just now (the engine hands the
	// test only masked secrets; the Secret says it exists).
	ctx := bundledtest.Ctx(t, time.Minute)
	sec, err := r.k.Client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "type=bootstrap.kubernetes.io/token"})
	if err != nil {
		t.Fatal(err)
	}
	fresh := false
	for _, s := range sec.Items {
		fresh = fresh || time.Since(s.CreationTimestamp.Time) < time.Minute
	}
	if !fresh {
		t.Errorf("no bootstrap token made by refresh-token among %d", len(sec.Items))
	}
	if _, err := r.k.Client.CoreV1().Secrets("kube-system").Get(ctx, "kubeadm-certs", metav1.GetOptions{}); err != nil {
		t.Errorf("kubeadm-certs after refresh-cert-key-stacked: %v", err)
	}

	// Joins with the captured values: discovery through the load balancer
	// and the certificate download are real; kubeadm prints what it would
	// write. The downloaded CA key is cp0's.
	cp0Key := r.onHost(t, r.cp0, "cat /etc/kubernetes/pki/ca.key")
	r.onHost(t, "cp1", "rm -rf /etc/kubernetes/tmp")
	rec := b.verify(t, "join-control-plane-upload", true)
	for _, want := range []string{"cp1", "cp2", "Downloading the certificates in Secret \"kubeadm-certs\""} {
		if !strings.Contains(rec.Output, want) {
			t.Errorf("join-control-plane-upload output lacks %q:\n%s", want, rec.Output)
		}
	}
	if got := r.onHost(t, "cp1", "cat /etc/kubernetes/tmp/kubeadm-join-dryrun*/ca.key"); got != cp0Key {
		t.Errorf("cp1 did not download and decrypt cp0's CA key (got %d bytes)", len(got))
	}
	b.verify(t, "join-workers-run", true)
	b.verify(t, "final-check-lb", false)

}

// TestBundledKubeadmJoinRejectsWrongValues runs the control-plane join
// block with one wrong value each: kubeadm (dry-run on the host, discovery
// and download for real) refuses a CA hash that pins another key, a
// certificate key that does not decrypt kubeadm-certs, and a token the
// cluster does not know.
func TestBundledKubeadmJoinRejectsWrongValues(t *testing.T) {
	r := newKubeadmRig(t)
	wantHash := r.caHash(t)
	version := sandbox.KubeVersion
	token := strings.TrimSpace(r.onHost(t, r.cp0, "kubeadm token create --ttl 10m"))
	r.onHost(t, r.cp0, "kubeadm init phase upload-certs --upload-certs >/dev/null")
	// Wrong values fail, through the same blocks.
	for _, tc := range []struct {
		name, capture, value, want string
		limit                      time.Duration
	}{
		{"wrong-ca-hash", "CA_CERT_HASH", "sha256:" + strings.Repeat("0", 64), "none of the public keys", 2 * time.Minute},
		{"wrong-cert-key", "CERT_KEY", strings.Repeat("0", 64), "kubeadm-certs", 2 * time.Minute},
		{"wrong-token", "JOIN_TOKEN", "abcdef.0123456789abcdef", "", 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params("CONTROL_PLANE_HOSTS", "cp2"))
			vals := map[string]string{"KUBEADM_VERSION": version, "JOIN_TOKEN": token, "CA_CERT_HASH": wantHash, "CERT_KEY": strings.Repeat("0", 64)}
			vals[tc.capture] = tc.value
			w.eng.SetCaptures(w.rb, vals)
			rec := w.run(t, "join-control-plane-upload", true, tc.limit)
			if rec.Status == executor.StatusVerified {
				t.Fatalf("join with a wrong %s verified:\n%s", tc.capture, rec.Output)
			}
			if tc.want != "" && !strings.Contains(rec.Output, tc.want) {
				t.Errorf("join with a wrong %s: %s %q, output lacks %q:\n%s", tc.capture, rec.Status, rec.Reasons, tc.want, bundledtest.Tail(rec.Output, 15))
			}
		})
	}
}

// leakedSecret matches a join token or certificate key in the clear.
var leakedSecret = regexp.MustCompile(`--token\s+[a-z0-9]{6}\.[a-z0-9]{16}|--certificate-key\s+[0-9a-f]{64}|certificate key:\s+[0-9a-f]{64}`)

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TestBundledKubeadmExternalEtcd runs the runbook's external-etcd steps
// against the sandbox's three etcd hosts, each a real TLS etcd member with
// kubeadm-made certificates (the kubeadm HA etcd guide's layout):
// check-etcd-certs on the members, the certificate copy from etcd0 to cp0,
// check-etcd-health from cp0 with the copied client certificate, then
// kubeadm init in dry-run against the real members; and with one member
// killed, check-etcd-health names it and fails.
func TestBundledKubeadmExternalEtcd(t *testing.T) {
	r := newKubeadmRig(t)
	if n := len(r.s.Inventory.Groups[sandbox.GroupEtcd]); n < 3 {
		t.Fatalf("the full sandbox has %d etcd hosts, want 3", n)
	}
	files := []string{"etcd/ca.crt", "apiserver-etcd-client.crt", "apiserver-etcd-client.key"}
	// cp0's own (stacked) files come back at the end: other tests use them.
	backup := r.onHost(t, r.cp0, "cd /etc/kubernetes/pki && tar czf - "+strings.Join(files, " ")+" | base64 -w0")
	t.Cleanup(func() {
		r.onHost(t, r.cp0, "cd /etc/kubernetes/pki && echo "+backup+" | base64 -d | tar xzf -")
	})
	b := newBundled(t, "kubeadm-ha.md", r.k, r.s, r.params("ETCD_TOPOLOGY", "external"))
	b.eng.SetCaptures(b.rb, map[string]string{"KUBEADM_VERSION": sandbox.KubeVersion})

	if rec := b.verify(t, "check-etcd-certs", false); strings.Count(rec.Output, "apiserver-etcd-client.key") != 3 {
		t.Errorf("check-etcd-certs:\n%s", rec.Output)
	}
	b.verify(t, "prepare-first-cp-pki", false)
	b.verify(t, "copy-etcd-certs", false)
	if got, want := fileStates(t, r.s, r.cp0, files), fileStates(t, r.s, "etcd0", files); !maps.Equal(got, want) {
		t.Errorf("cp0 after copy-etcd-certs:\n%v\netcd0:\n%v", got, want)
	}
	rec := b.verify(t, "check-etcd-health", false)
	if strings.Count(rec.Output, `ok   `) != 3 {
		t.Errorf("check-etcd-health with three live members:\n%s", rec.Output)
	}

	// kubeadm init (dry-run) with the external members in its configuration.
	b.verify(t, "write-kubeadm-config", true)
	if rec := b.verify(t, "init-external", true); !strings.Contains(rec.Output, "https://etcd0:2379") {
		t.Errorf("init-external: the apiserver manifest lacks the external etcd endpoints:\n%s", bundledtest.Tail(rec.Output, 30))
	}

	// Re-uploading the certificates with the external configuration puts
	// the etcd client pair in kubeadm-certs too.
	b.verify(t, "refresh-cert-key-external", false)
	sec, err := r.k.Client.CoreV1().Secrets("kube-system").Get(bundledtest.Ctx(t, time.Minute), "kubeadm-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"external-etcd-ca.crt", "external-etcd.crt", "external-etcd.key"} {
		if _, ok := sec.Data[k]; !ok {
			t.Errorf("kubeadm-certs after refresh-cert-key-external lacks %s (has %v)", k, len(sec.Data))
		}
	}

	// A member dies: the check names it and fails (after its retries).
	if err := r.sb.Remove(bundledtest.Ctx(t, time.Minute), "etcd-etcd2", true); err != nil {
		t.Fatal(err)
	}
	rec = b.run(t, "check-etcd-health", false, 2*time.Minute)
	if rec.Status == executor.StatusVerified || !strings.Contains(rec.Output, "FAIL etcd2") {
		t.Errorf("check-etcd-health with etcd2 dead: %s\n%s", rec.Status, rec.Output)
	}
}

// TestBundledKubeadmScpCerts walks the scp tab of the certificate
// distribution. The test plays the administrator at the PC: it starts a real
// ssh-agent holding the sandbox's key and runs the manual blocks' own text
// (scp-certs, then scp-etcd-ca-key or scp-etcd-client-cert) in a root shell on
// cp0 reached with agent forwarding (ssh -A), as ssh-agent-session says; scp
// then copies cp0's kubeadm-generated PKI into COPY_USER's home on cp1 and
// cp2 (each host's home is its own in the sandbox). The ssh blocks move-certs,
// move-etcd-ca-key / move-etcd-client-cert and secure-copied-keys run through
// the executor; the result must equal cp0's files by content and mode, the
// homes must be empty again, and this machine's home must hold no key.
func TestBundledKubeadmScpCerts(t *testing.T) {
	r := newKubeadmRig(t)
	s := r.s
	if s.Inventory.Home == "" {
		t.Skip("the hosts share this machine's home directory (no private homes)")
	}
	for _, tool := range []string{"ssh", "ssh-agent", "ssh-add"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/ci-deps.sh installs openssh-client)", tool)
		}
	}
	targets := []string{"cp1", "cp2"}
	clean := func() {
		for _, h := range targets {
			s.Run(t, h, "rm -rf /etc/kubernetes/pki /etc/kubernetes/tmp; find ~ -maxdepth 1 -name '*.crt' -delete -o -maxdepth 1 -name '*.key' -delete -o -maxdepth 1 -name '*.pub' -delete")
		}
	}
	clean()
	t.Cleanup(clean)
	homeBefore := pathState(t, s.Inventory.Home)

	env := bundledtest.StartAdminAgent(t, s.Inventory.IdentityFile)

	// asAdmin runs the manual block id's text in a root shell on cp0 reached
	// with ssh -A, the runbook's parameters in its environment.
	asAdmin := func(t *testing.T, b *bundled, id string) string {
		t.Helper()
		blk := b.rb.BlockByID(id)
		if blk == nil || blk.Target != runbook.TargetManual {
			t.Fatalf("%s: no manual block", id)
		}
		out, err := bundledtest.RunAsAdmin(bundledtest.Ctx(t, time.Minute), s.Inventory, env, r.cp0, blk.Content, b.params)
		if err != nil {
			t.Fatalf("%s on %s: %v\n%s", id, r.cp0, err, out)
		}
		return out
	}

	src := fileStates(t, s, r.cp0, append(append(slices.Clone(sharedCerts), etcdCAKey), etcdClient...))
	for _, topo := range []string{"stacked", "external"} {
		t.Run(topo, func(t *testing.T) {
			clean()
			b := newBundled(t, "kubeadm-ha.md", r.k, s, r.params("CERT_DISTRIBUTION", "scp", "ETCD_TOPOLOGY", topo,
				"CONTROL_PLANE_HOSTS", strings.Join(targets, ","), "COPY_USER", s.Inventory.User))
			extra, scpExtra, moveExtra := []string{etcdCAKey}, "scp-etcd-ca-key", "move-etcd-ca-key"
			if topo == "external" {
				extra, scpExtra, moveExtra = etcdClient, "scp-etcd-client-cert", "move-etcd-client-cert"
			}
			if topo == "stacked" {
				// Before any scp, the move has nothing to move and must
				// fail (bash -e), naming the missing file.
				rec := b.run(t, "move-certs", false, time.Minute)
				if rec.Status == executor.StatusVerified || !strings.Contains(rec.Output, "ca.crt") {
					t.Fatalf("move-certs with empty homes: %s\n%s", rec.Status, rec.Output)
				}
			}
			asAdmin(t, b, "scp-certs")
			asAdmin(t, b, scpExtra)
			for _, h := range targets {
				if ls := s.Run(t, h, "ls ~"); !strings.Contains(ls, "ca.key") || !strings.Contains(ls, "etcd-ca.crt") {
					t.Fatalf("scp left no certificates in %s's home: %q", h, ls)
				}
			}
			if ls := s.Run(t, r.cp0, "ls ~"); strings.TrimSpace(ls) != "" {
				t.Errorf("cp0's home holds %q: scp wrote to the wrong host", ls)
			}
			b.verify(t, "move-certs", false)
			b.verify(t, moveExtra, false)
			b.verify(t, "secure-copied-keys", false)
			want := append(slices.Clone(sharedCerts), extra...)
			for _, h := range targets {
				got := fileStates(t, s, h, want)
				for _, f := range want {
					if got[f] != src[f] {
						t.Errorf("%s:/etc/kubernetes/pki/%s is %q, cp0's is %q", h, f, got[f], src[f])
					}
				}
				if ls := s.Run(t, h, "ls ~"); strings.TrimSpace(ls) != "" {
					t.Errorf("%s's home still holds %q after the move", h, ls)
				}
			}
		})
	}
	if got := pathState(t, s.Inventory.Home); got != homeBefore {
		t.Errorf("this machine's %s changed: %s, was %s", s.Inventory.Home, got, homeBefore)
	}
}
