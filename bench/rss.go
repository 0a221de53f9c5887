package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// watchPeakRSS follows the peak resident set of process pid (VmHWM in
// /proc/PID/status, the high-water mark of its own memory since its exec)
// until it exits; the returned func waits for that and gives the peak in
// bytes. The rusage that wait returns is no use here: Go starts a child
// with vfork, and Linux carries the parent's high-water mark into the
// child's across exec, so every tool started by a bench that has grown (the
// in-process rebuilds, Chromium's client) showed the bench's own peak.
func watchPeakRSS(pid int) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			b, err := os.ReadFile(path)
			if err != nil {
				return
			}
			// A zombie (exited, not yet waited for) has no VmHWM line.
			i := bytes.Index(b, []byte("VmHWM:"))
			if i < 0 {
				return
			}
			f := bytes.Fields(b[i+len("VmHWM:"):])
			if len(f) > 0 {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil && kb<<10 > peak.Load() {
					peak.Store(kb << 10)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() int64 {
		<-done
		return peak.Load()
	}
}
