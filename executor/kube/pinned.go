package kube

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// PinnedKubeconfig writes a kubeconfig that holds only this Runner's
// context (minified, certificates and keys embedded, current-context set)
// into a fresh private directory under dir ("" = the system temp dir), mode
// 0600, so that a target=kube shell block's kubectl and helm can touch that
// cluster and no other. The engine passes "KUBECONFIG="+path to the local
// runner; cleanup removes the directory.
//
// Credentials that run a program (exec plugins) or read files at use time
// are carried as written: they keep working, but outside the file.
func (r *Runner) PinnedKubeconfig(dir string) (path string, cleanup func() error, err error) {
	cfg := r.raw.DeepCopy()
	cfg.CurrentContext = r.target.Context
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return "", nil, fmt.Errorf("pin kube context %q: %w", r.target.Context, err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return "", nil, fmt.Errorf("pin kube context %q: %w", r.target.Context, err)
	}
	cfg.Preferences = clientcmdapi.Preferences{}
	tmp, err := os.MkdirTemp(dir, "cairn-kube-")
	if err != nil {
		return "", nil, fmt.Errorf("pin kube context %q: %w", r.target.Context, err)
	}
	cleanup = func() error { return os.RemoveAll(tmp) }
	path = filepath.Join(tmp, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		_ = cleanup()
		return "", nil, fmt.Errorf("pin kube context %q: %w", r.target.Context, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = cleanup()
		return "", nil, fmt.Errorf("pin kube context %q: %w", r.target.Context, err)
	}
	return path, cleanup, nil
}
