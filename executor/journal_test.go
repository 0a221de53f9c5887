package executor_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
)

// journalChild is the test binary re-run as a separate process that
// appends to a journal: CAIRN_JOURNAL_CHILD=path,name,count[,size]. It
// prints each record's id once Append has returned (the record is durable).
func init() {
	spec := os.Getenv("CAIRN_JOURNAL_CHILD")
	if spec == "" {
		return
	}
	parts := strings.Split(spec, ",")
	path, name := parts[0], parts[1]
	count, _ := strconv.Atoi(parts[2])
	size := 0
	if len(parts) > 3 {
		size, _ = strconv.Atoi(parts[3])
	}
	j, err := executor.OpenJournal(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	out := strings.Repeat("x", size)
	for i := 0; i < count; i++ {
		id := fmt.Sprintf("%s-%d", name, i)
		if err := j.Append(executor.Record{ID: id, Runbook: "t", Block: "b" + strconv.Itoa(i%7), Hash: "h", Status: executor.StatusVerified, Output: out + id}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		fmt.Println(id)
	}
	j.Close()
	os.Exit(0)
}

func child(path, name string, count, size int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("CAIRN_JOURNAL_CHILD=%s,%s,%d,%d", path, name, count, size))
	return cmd
}

// TestJournalConcurrentProcesses: the review ran cairn run while the daemon
// ran and the daemon overwrote the CLI's records. Here four processes and
// this one append at once; every record is there, whole, and a fresh open
// reads them all.
func TestJournalConcurrentProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := executor.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const procs, each = 4, 150
	var wg sync.WaitGroup
	errs := make(chan error, procs+1)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			out, err := child(path, "p"+strconv.Itoa(p), each, 2048).CombinedOutput()
			if err != nil {
				errs <- fmt.Errorf("process %d: %v\n%s", p, err, out)
			}
		}(p)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < each; i++ {
			if err := j.Append(executor.Record{ID: fmt.Sprintf("me-%d", i), Runbook: "t", Block: "b", Hash: "h", Status: executor.StatusFailed}); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	j2, err := executor.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	var buf bytes.Buffer
	n, err := j2.Export(context.Background(), &buf)
	if err != nil || n != (procs+1)*each {
		t.Fatalf("export: %v, %d records, want %d", err, n, (procs+1)*each)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		id := line[strings.Index(line, `"id":"`)+6:]
		id = id[:strings.IndexByte(id, '"')]
		if seen[id] {
			t.Errorf("record %s twice", id)
		}
		seen[id] = true
		if !strings.HasPrefix(id, "me-") && !strings.Contains(line, id+`","truncated`) && !strings.Contains(line, `"output":"`+strings.Repeat("x", 2048)+id+`"`) {
			t.Errorf("record %s is torn: %.120s", id, line)
		}
	}
	if err := j2.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestJournalSurvivesKill9 kills a writer with SIGKILL many times at random
// points: every record it acknowledged is there, the database checks, and
// writing goes on.
func TestJournalSurvivesKill9(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	acked := map[string]bool{}
	for round := 0; round < 10; round++ {
		cmd := child(path, "r"+strconv.Itoa(round), 100000, 64<<10)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		for i := 0; i < 3+round*2 && sc.Scan(); i++ {
			acked[sc.Text()] = true
		}
		cmd.Process.Signal(syscall.SIGKILL)
		for sc.Scan() { // acknowledged before the signal landed
			acked[sc.Text()] = true
		}
		cmd.Wait()
	}
	j, err := executor.OpenJournal(path)
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	defer j.Close()
	if err := j.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := j.Export(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	for id := range acked {
		if !strings.Contains(buf.String(), `"id":"`+id+`"`) {
			t.Errorf("acknowledged record %s is gone", id)
		}
	}
	if err := j.Append(executor.Record{ID: "after", Runbook: "t"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d acknowledged records over 10 kills, all present", len(acked))
}

// TestJournalRetention: old output is compacted, each block's last verified
// run is kept whole, and the page's results still come back.
func TestJournalRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := executor.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(executor.Record{ID: "keep", Runbook: "t", Block: "old", Hash: "h1", Status: executor.StatusVerified, Output: "the old block's verified output"}); err != nil {
		t.Fatal(err)
	}
	total := executor.KeepOutputRuns + 50
	for i := 0; i < total; i++ {
		if err := j.Append(executor.Record{ID: strconv.Itoa(i), Runbook: "t", Block: "busy", Hash: "h2", Status: executor.StatusFailed, Output: "out " + strconv.Itoa(i),
			Hosts: []executor.HostRecord{{Host: "a", Output: "host out"}, {Host: "b"}}, Captures: map[string]string{"C": strconv.Itoa(i), "S": executor.Mask}}); err != nil {
			t.Fatal(err)
		}
	}
	latest, err := j.Latest("t", map[string]string{"old": "h1", "busy": "h2"})
	if err != nil || latest["old"].Output != "the old block's verified output" || latest["old"].Compacted {
		t.Fatalf("last verified run: %v %+v", err, latest["old"])
	}
	recs, err := j.Records("t", total+10)
	if err != nil || len(recs) != total+1 {
		t.Fatalf("records: %v %d", err, len(recs))
	}
	if recs[0].ID != strconv.Itoa(total-1) || recs[0].Output == "" || recs[0].Hosts[0].Output != "host out" {
		t.Errorf("newest run lost its output: %+v", recs[0])
	}
	oldest := recs[len(recs)-2] // run "0"
	if oldest.ID != "0" || !oldest.Compacted || oldest.Output != "" || oldest.Hosts[0].Output != "" || oldest.Hosts[1].Host != "b" {
		t.Errorf("old run not compacted: %+v", oldest)
	}
	caps, err := j.Captures("t")
	if err != nil || caps["C"] != strconv.Itoa(total-1) || caps["S"] != "" {
		t.Errorf("captures: %v %v", err, caps)
	}
}

// TestJournalStartIndependentOfHistory: opening a journal with a large
// history reads none of it (the old journal read everything: 5.1 GB RSS
// for 1.13 GB). Measured as bytes allocated by OpenJournal and one page's
// queries; the time is in BenchmarkJournalOpen.
func TestJournalStartIndependentOfHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MB")
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	fillJournal(t, path, 200, 1<<20)
	if fi, err := os.Stat(path); err == nil {
		t.Logf("journal: %d MB", fi.Size()>>20)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	j, err := executor.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	// The page of another runbook, and the newest run of this one.
	if _, err := j.Latest("other", map[string]string{"b0": "h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Records("t", 1); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	t.Logf("open + latest: %v, %d KB allocated", time.Since(start), (after.TotalAlloc-before.TotalAlloc)>>10)
	j.Close()
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("opening a 200 MB journal allocated %d MB", alloc>>20)
	}
}

// fillJournal writes n runs of size bytes of output each, fast (in
// processes' way: one Append each).
func fillJournal(t testing.TB, path string, n, size int) {
	out, err := child(path, "fill", n, size).CombinedOutput()
	if err != nil {
		t.Fatalf("fill: %v\n%.400s", err, out)
	}
}

// TestJournalLegacyRefusedThenImported: an older Cairn's JSON-lines
// journal is not opened as a database; cairn journal import reads it (a
// torn last line is skipped, duplicates are not doubled).
func TestJournalLegacyImport(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "journal.jsonl")
	os.WriteFile(legacy, []byte(`{"id":"1","runbook":"t","block":"a","hash":"h","status":"verified","output":"one"}`+"\n"+`{"id":"2","run`), 0o600)
	if _, err := executor.OpenJournal(legacy); err == nil || !strings.Contains(err.Error(), "JSON-lines journal from an older Cairn") {
		t.Fatalf("legacy opened as a database: %v", err)
	}
	j, err := executor.OpenJournal(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := 0; i < 2; i++ {
		f, _ := os.Open(legacy)
		n, err := j.Import(context.Background(), f)
		f.Close()
		if i == 0 && (err == nil || n != 1) || i == 1 && n != 0 {
			t.Fatalf("import %d: %d %v", i, n, err)
		}
	}
	latest, _ := j.Latest("t", map[string]string{"a": "h"})
	if latest["a"].Output != "one" {
		t.Errorf("imported: %+v", latest)
	}
	fi, _ := os.Stat(j.Path())
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", fi.Mode().Perm())
	}
}

var (
	bigJournalOnce sync.Once
	bigJournal     string
)

// BenchmarkJournalOpen: opening a journal with 1 GB of history and
// answering a page (another runbook's results, this one's newest run). The
// review's JSON-lines journal took 11.3 s and 5.1 GB RSS for 1.13 GB.
func BenchmarkJournalOpen(b *testing.B) {
	bigJournalOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cairn-bench-journal-")
		if err != nil {
			b.Fatal(err)
		}
		bigJournal = filepath.Join(dir, "journal.db")
		fillJournal(b, bigJournal, 1000, 1<<20) // KeepOutputRuns of 1 MiB each: the most output it keeps
	})
	fi, _ := os.Stat(bigJournal)
	var ms runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j, err := executor.OpenJournal(bigJournal)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := j.Latest("other", map[string]string{"b0": "h"}); err != nil {
			b.Fatal(err)
		}
		if _, err := j.Records("t", 1); err != nil {
			b.Fatal(err)
		}
		j.Close()
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(fi.Size()>>20), "MB-history")
	b.ReportMetric(float64(ms.HeapInuse>>20), "MB-heap")
}

func BenchmarkJournalAppend(b *testing.B) {
	j, err := executor.OpenJournal(filepath.Join(b.TempDir(), "journal.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	out := strings.Repeat("y", 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := j.Append(executor.Record{ID: strconv.Itoa(i), Runbook: "t", Block: "b", Hash: "h", Status: executor.StatusVerified, Output: out}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigJournal != "" {
		os.RemoveAll(filepath.Dir(bigJournal))
	}
	os.Exit(code)
}

// TestJournalLast: a block's newest run whatever its status, beside its
// last verified one.
func TestJournalLast(t *testing.T) {
	j, err := executor.OpenJournal(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.Append(executor.Record{ID: "1", Runbook: "t", Block: "a", Hash: "h", Status: executor.StatusVerified})
	j.Append(executor.Record{ID: "2", Runbook: "t", Block: "a", Hash: "h", Status: executor.StatusFailed, Reasons: []string{"no"}})
	j.Append(executor.Record{ID: "3", Runbook: "t", Block: "a", Hash: "old", Status: executor.StatusFailed})
	last, err := j.Last("t", map[string]string{"a": "h"})
	latest, _ := j.Latest("t", map[string]string{"a": "h"})
	if err != nil || last["a"].ID != "2" || latest["a"].ID != "1" {
		t.Fatalf("last %+v latest %+v %v", last["a"], latest["a"], err)
	}
}
