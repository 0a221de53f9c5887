// Package sandbox starts and stops Cairn's sandbox: a real Kubernetes control
// plane (etcd, kube-apiserver and kube-controller-manager on 127.0.0.1) and
// real SSH hosts (one Debian sshd per host, each in its own network and mount
// namespace on a private bridge, with its own /etc/kubernetes, or on loopback
// ports sharing this machine's file system where namespaces are not allowed).
//
// The sandbox serves two users: a reader who runs `cairn sandbox up` to try the
// bundled runbooks against real servers, and the test rig (package
// sandbox/testrig) that gives tests a running cluster and hosts.
//
// Everything a sandbox owns lives in its state directory: keys, certificates,
// the kubeconfig, the SSH inventory, logs and a state file that records every
// process it started, so that Down, called from another process, stops exactly
// those processes and removes exactly the network devices it made.
//
// The server binaries are built by scripts/sandbox-bins.sh from the builder
// modules in sandbox/build; see BinDir.
//
// This package imports nothing of site/, executor/ or runbook/.
package sandbox
