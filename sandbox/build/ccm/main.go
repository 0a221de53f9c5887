// Command cloud-controller-manager is k8s.io/cloud-provider's controller
// manager at the sandbox's release with the library's fake provider
// registered as "fake", wired the way the library's sample main is. It is
// "version N+1" of the CCM leader-migration runbook; build it with
// scripts/sandbox-bins.sh.
package main

import (
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/fake"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

func main() {
	cloudprovider.RegisterCloudProvider("fake", func(io.Reader) (cloudprovider.Interface, error) {
		// RouteMap: the fake keeps routes in it, and a nil map panics at the
		// first route the route controller creates (a real node has a pod CIDR).
		return &fake.Cloud{ExistsByProviderID: true, RouteMap: map[string]*fake.Route{}}, nil
	})
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(cmd))
}

func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil || cloud == nil {
		klog.Fatalf("cloud provider %q could not be initialized: %v", shared.Name, err)
	}
	return cloud
}
