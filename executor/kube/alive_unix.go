package kube

import (
	"strconv"
	"syscall"
)

// processAlive reports whether pid (an AnnotationPID value) is a live
// process on this machine. A value that is no pid counts as dead: its pod
// is swept.
func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	err = syscall.Kill(n, 0)
	return err == nil || err == syscall.EPERM
}
