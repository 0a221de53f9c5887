package kube

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// processAlive reports whether pid (an AnnotationPID value) is a live
// process on this machine. A value that is no pid counts as dead, and so
// does a zombie (killed, its parent not yet told): its pods are swept.
func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(n) + "/stat"); err == nil {
		// pid (comm) S ...: the state follows the last ')'.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			return false
		}
	}
	err = syscall.Kill(n, 0)
	return err == nil || err == syscall.EPERM
}
