// Command kube-controller-manager-n is kube-controller-manager v1.30 (the
// last releases whose KCM runs cloud controllers in-tree and takes part in
// Leader Migration) with k8s.io/cloud-provider's fake provider registered
// as "fake", so that its cloud controllers run here. It is "version N" of
// the CCM leader-migration runbook; build it with scripts/sandbox-bins.sh.
package main

import (
	"io"
	"os"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	cloudprovider.RegisterCloudProvider("fake", func(io.Reader) (cloudprovider.Interface, error) {
		// RouteMap: the fake keeps routes in it, and a nil map panics at the
		// first route the route controller creates (a real node has a pod CIDR).
		return &fake.Cloud{ExistsByProviderID: true, RouteMap: map[string]*fake.Route{}}, nil
	})
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
