package testrig

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ProcessAlive reports whether pid runs and is not a zombie (or dead): what
// tests that check for leftover processes ask.
func ProcessAlive(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "State:"); ok {
			s := strings.TrimSpace(rest)
			return !strings.HasPrefix(s, "Z") && !strings.HasPrefix(s, "X")
		}
	}
	return false
}

// PIDs lists the processes of this machine (every numeric entry of /proc),
// for tests that look for what a sandbox left behind.
func PIDs() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Buffer is output a test reads while a server or command writes it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
