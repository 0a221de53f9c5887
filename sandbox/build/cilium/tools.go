//go:build tools

// Package tools records the commands this module builds, so that go.mod and
// go.sum pin every package they need.
package tools

import (
	_ "github.com/cilium/cilium/cilium-dbg"
	_ "github.com/cilium/cilium/daemon"
	_ "github.com/cilium/cilium/operator"
	_ "github.com/cilium/cilium/plugins/cilium-cni"
)
