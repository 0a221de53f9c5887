// Command coredns is CoreDNS with the plugins kubeadm's Corefile uses and no
// others: the cluster DNS of the sandbox nodes' coredns image. CoreDNS's own
// main links every plugin (clouds included); this one keeps the build small,
// the way CoreDNS documents custom builds.
package main

import (
	"github.com/coredns/coredns/coremain"

	// Every plugin kubeadm's Corefile names (kubeadm v1.37 dns addon), and
	// the ones a reader adds most often.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() { coremain.Run() }
