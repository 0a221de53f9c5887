//go:build tools

// Package tools pins the etcd release that kubeadm v1.37.2 names for its
// stacked-etcd static pod (registry.k8s.io/etcd:3.7.0-0). The sandbox's own
// etcd servers stay on the release in ../etcd.
package tools

import _ "go.etcd.io/etcd/server/v3"
