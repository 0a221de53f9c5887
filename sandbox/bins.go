package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cairn-dev/cairn/sandbox/imagebuild"
)

// Versions of the server binaries. Keep them in step with sandbox/build/go.mod,
// sandbox/build/etcd/go.mod and scripts/sandbox-bins.sh.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.6.16"
)

// The CCM leader-migration runbook's components, built into the same
// directory by scripts/sandbox-bins.sh (sandbox/build/kcm-n and
// sandbox/build/ccm): KCM "version N" and the CCM "version N+1", each with
// the fake cloud provider.
const (
	KCMNVersion = "v1.30.14"
	BinKCMN     = "kube-controller-manager-n"
	BinCCM      = "cloud-controller-manager"
)

// BinKey names the cache directory of one set of binaries.
const BinKey = KubeVersion + "-etcd" + "3.6.16"

// EnvBinDir overrides where the server binaries are looked for.
const EnvBinDir = "CAIRN_SANDBOX_BIN"

// Names of the server binaries in the bin directory.
const (
	binEtcd      = "etcd"
	binAPIServer = "kube-apiserver"
	binKCM       = "kube-controller-manager"
	binKubeadm   = "kubeadm"
)

// BinDir returns the directory that holds the server binaries:
// $CAIRN_SANDBOX_BIN when set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/cairn/sandbox/<BinKey>/bin, where
// scripts/sandbox-bins.sh puts them.
func BinDir() string {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "cairn", "sandbox", BinKey, "bin")
}

// CheckBins reports whether dir holds the server binaries; the error (a
// *MissingError) names the first one missing and the command that builds it.
func CheckBins(dir string) error {
	_, err := findKubeBins(dir)
	return err
}

// kubeBins are the resolved paths of the server binaries.
type kubeBins struct {
	etcd, apiserver, kcm, kubeadm string
}

// findKubeBins looks for the server binaries in dir and names the command that
// builds them when one is missing.
func findKubeBins(dir string) (kubeBins, error) {
	var b kubeBins
	for _, x := range []struct {
		name string
		dst  *string
	}{{binEtcd, &b.etcd}, {binAPIServer, &b.apiserver}, {binKCM, &b.kcm}, {binKubeadm, &b.kubeadm}} {
		p := filepath.Join(dir, x.name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return b, &MissingError{
				Name:    x.name,
				Where:   p,
				Install: "scripts/sandbox-bins.sh (builds " + KubeVersion + " and etcd " + EtcdVersion + " into " + dir + ", about 20 minutes cold on 2 cores)",
			}
		}
		*x.dst = p
	}
	return b, nil
}

// lookTool finds a system tool and names the Debian package that provides it.
func lookTool(name, pkg string) (string, error) {
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", &MissingError{Name: name, Where: "PATH, /usr/sbin", Install: "apt-get install -y " + pkg}
}

// MissingError reports a prerequisite that is not installed and how to
// install it. It wraps ErrMissing.
type MissingError = imagebuild.MissingError
