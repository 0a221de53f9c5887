package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Status is how a run ended.
type Status string

// Run statuses.
const (
	StatusVerified  Status = "verified"  // ran and every expectation held
	StatusFailed    Status = "failed"    // ran, and an expectation did not hold
	StatusError     Status = "error"     // could not run (connection, API, setup)
	StatusCancelled Status = "cancelled" // stopped by the reader
	StatusSkipped   Status = "skipped"   // its condition was false
	StatusRunning   Status = "running"
)

// Record is one completed run as the journal keeps it. Output is redacted
// and bounded; secret values never reach it.
type Record struct {
	ID        string            `json:"id"`
	Runbook   string            `json:"runbook"` // slug
	Path      string            `json:"path"`
	Block     string            `json:"block"`
	Step      string            `json:"step,omitempty"`
	Hash      string            `json:"hash"`
	Target    string            `json:"target"`
	Where     string            `json:"where,omitempty"` // kube context or host list
	Status    Status            `json:"status"`
	Reasons   []string          `json:"reasons,omitempty"`
	Hosts     []HostRecord      `json:"hosts"`
	Start     time.Time         `json:"start"`
	Duration  float64           `json:"duration"` // seconds
	Params    map[string]string `json:"params,omitempty"`
	Captures  map[string]string `json:"captures,omitempty"` // secret ones as Mask
	Output    string            `json:"output"`
	Truncated bool              `json:"truncated,omitempty"`
	Attempts  int               `json:"attempts,omitempty"`
}

// HostRecord is one host's part of a run.
type HostRecord struct {
	Host     string  `json:"host"`
	Exit     int     `json:"exit"`
	Error    string  `json:"error,omitempty"`
	Duration float64 `json:"duration"`
	Output   string  `json:"output,omitempty"` // per host, when several
}

// Journal is an append-only file of Records, one JSON object per line. Every
// append is a single write followed by fsync, so a crash (even kill -9)
// leaves at most a partial last line, which Open cuts off.
type Journal struct {
	mu      sync.Mutex
	f       *os.File
	path    string
	records []Record
}

// OpenJournal opens (creating) the journal at path and reads it back.
func OpenJournal(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j := &Journal{f: f, path: path}
	if err := j.recover(); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

func (j *Journal) recover() error {
	data, err := io.ReadAll(j.f)
	if err != nil {
		return fmt.Errorf("read journal %s: %w", j.path, err)
	}
	good := bytes.LastIndexByte(data, '\n') + 1
	if good < len(data) {
		// A write was cut short: drop the partial line.
		if err := j.f.Truncate(int64(good)); err != nil {
			return fmt.Errorf("repair journal %s: %w", j.path, err)
		}
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("repair journal %s: %w", j.path, err)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data[:good]))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var r Record
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("journal %s:%d: unreadable record: %v (move the file away to start a new journal)", j.path, n, err)
		}
		j.records = append(j.records, r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read journal %s: %w", j.path, err)
	}
	if _, err := j.f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	return nil
}

// Append writes r durably.
func (j *Journal) Append(r Record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal is closed")
	}
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("append to journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync journal %s: %w", j.path, err)
	}
	j.records = append(j.records, r)
	return nil
}

// Records returns the runs of a runbook (all when slug is ""), oldest first.
func (j *Journal) Records(slug string) []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Record
	for _, r := range j.records {
		if slug == "" || r.Runbook == slug {
			out = append(out, r)
		}
	}
	return out
}

// Latest returns each block's most recent verified run of a runbook whose
// hash still matches, keyed by block id.
func (j *Journal) Latest(slug string, hashes map[string]string) map[string]Record {
	out := map[string]Record{}
	for _, r := range j.Records(slug) {
		if r.Status == StatusVerified && hashes[r.Block] == r.Hash {
			out[r.Block] = r
		}
	}
	return out
}

// Close closes the file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }
