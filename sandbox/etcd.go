package sandbox

import (
	"context"
	"os"
	"strconv"
)

// etcdServer is the cluster's one-member etcd on loopback, plain HTTP.
type etcdServer struct {
	bin  string
	node cpNode
	url  string // client URL, set by Start
}

func (e *etcdServer) Name() string { return "etcd" }

func (e *etcdServer) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	ports, err := e.node.ports(portEtcd, portEtcdPeer)
	if err != nil {
		return Probe{}, err
	}
	e.url = "http://" + e.node.hostPort(ports[0])
	peer := "http://" + e.node.hostPort(ports[1])
	listen := e.url
	if e.node.onHost() {
		// Also on the host's own loopback, as kubeadm's stacked etcd.
		listen += ",http://127.0.0.1:" + strconv.Itoa(ports[0])
	}
	dataDir := sb.path("kube", "etcd")
	sb.progress("kube: starting etcd %s on %s", EtcdVersion, e.url)
	_ = os.RemoveAll(dataDir)
	_, err = sb.spawn(e.Name(), e.node.wrap([]string{e.bin,
		"--name=" + etcdName,
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + listen,
		"--advertise-client-urls=" + e.url,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + etcdName + "=" + peer,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync", // a throwaway cluster: speed over durability
		"--log-level=warn",
	}), serverEnv())
	return Probe{Kind: ProbeHTTP, URL: e.url + "/health", Want: `"true"`}, err
}
