package sandbox

import (
	"context"
	"os"
	"strconv"
)

// etcdServer is the cluster's one-member etcd on loopback, plain HTTP.
type etcdServer struct {
	bin string
	url string // client URL, set by Start
}

func (e *etcdServer) Name() string { return "etcd" }

func (e *etcdServer) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	ports, err := freePorts(2)
	if err != nil {
		return Probe{}, err
	}
	e.url = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	dataDir := sb.path("kube", "etcd")
	sb.progress("kube: starting etcd %s on %s", EtcdVersion, e.url)
	_ = os.RemoveAll(dataDir)
	_, err = sb.spawn(e.Name(), []string{e.bin,
		"--name=" + etcdName,
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + e.url,
		"--advertise-client-urls=" + e.url,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + etcdName + "=" + peer,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync", // a throwaway cluster: speed over durability
		"--log-level=warn",
	}, serverEnv())
	return Probe{Kind: ProbeHTTP, URL: e.url + "/health", Want: `"true"`}, err
}
