//go:build tools

// Package tools records the command this module builds, so that go.mod and
// go.sum pin every package it needs.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
