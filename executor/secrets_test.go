package executor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/runbook"
)

const secretsRunbook = "---\ntitle: s\nparams:\n  - name: PW\n    secret: true\n    required: false\n  - name: PAD\n    type: int\n    default: 0\n---\n## s {#s}\n\n" +
	// One line longer than 64 KiB, with the secret at PAD bytes in.
	"```bash {#long target=local}\nhead -c \"$PAD\" /dev/zero | tr '\\0' x; printf '%s' \"$PW\"; head -c 70000 /dev/zero | tr '\\0' y; echo\n```\n\n" +
	"```bash {#json target=local capture.TOKEN='jsonpath={.token}' secret=TOKEN}\nprintf '{\"token\": \"%s\", \"other\": 1}\\n' \"$CAIRN_RUN_ID-tok\"\n```\n"

func secretsEngine(t *testing.T) (*executor.Engine, *runbook.Runbook) {
	t.Helper()
	rb, err := runbook.Parse("s.md", []byte(secretsRunbook))
	if err != nil {
		t.Fatal(err)
	}
	return &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{}}, Objects: kube.Checker{}}, rb
}

// TestRedactSplitLine (review 4c): a secret straddling the 64 KiB split of
// a long line leaked in 9 of 10 runs; at every offset around the split it
// must not reach the stream.
func TestRedactSplitLine(t *testing.T) {
	e, rb := secretsEngine(t)
	const pw = "Sup3r-s3cret-Passw0rd"
	for pad := 65536 - len(pw) - 2; pad <= 65536+2; pad++ {
		r, err := e.Prepare(executor.Request{Runbook: rb, BlockID: "long", Params: map[string]string{"PW": pw, "PAD": fmt.Sprint(pad)}})
		if err != nil {
			t.Fatal(err)
		}
		var s sink
		rec := r.Execute(context.Background(), &s)
		if rec.Status != executor.StatusVerified {
			t.Fatalf("pad %d: %s %v", pad, rec.Status, rec.Reasons)
		}
		got := s.out.String()
		if strings.Contains(got, pw) || strings.Contains(rec.Output, pw) {
			t.Fatalf("pad %d: the secret reached the stream", pad)
		}
		if !strings.Contains(got, executor.Mask) || len(got) < 70000 {
			t.Fatalf("pad %d: output lost (%d bytes)", pad, len(got))
		}
	}
}

// TestHeldSecretJSONPath (review 4b): a secret captured with jsonpath= is
// known only once the output is complete; the block's output is held back
// and shown redacted.
func TestHeldSecretJSONPath(t *testing.T) {
	e, rb := secretsEngine(t)
	r, err := e.Prepare(executor.Request{Runbook: rb, BlockID: "json"})
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	rec := r.Execute(context.Background(), &s)
	tok := r.ID + "-tok"
	if rec.Status != executor.StatusVerified || rec.Captures["TOKEN"] != executor.Mask {
		t.Fatalf("%s %v %v", rec.Status, rec.Reasons, rec.Captures)
	}
	if strings.Contains(s.out.String(), tok) || strings.Contains(rec.Output, tok) {
		t.Fatalf("the jsonpath secret streamed: %q", s.out.String())
	}
	if !strings.Contains(s.out.String(), `"token": "`+executor.Mask+`"`) {
		t.Errorf("held output not shown: %q", s.out.String())
	}
}

// TestShortSecretRefused (review 4d): a secret too short to mask is
// refused before anything runs.
func TestShortSecretRefused(t *testing.T) {
	e, rb := secretsEngine(t)
	if _, err := e.Prepare(executor.Request{Runbook: rb, BlockID: "long", Params: map[string]string{"PW": "ab"}}); err == nil || !strings.Contains(err.Error(), "cannot be masked") {
		t.Fatalf("short secret: %v", err)
	}
}

// TestNoRetryForWhatCannotHeal: a command that is not there fails once,
// not after retries × interval (the review waited 2 to 8 minutes).
func TestNoRetryForWhatCannotHeal(t *testing.T) {
	rb, err := runbook.Parse("r.md", []byte("---\ntitle: r\n---\n## s {#s}\n\n"+
		"```bash {#missing target=local retries=5 interval=1h}\ncairn-no-such-command-xyz --version\n```\n\n"+
		"```bash {#kubectl-words target=local retries=5 interval=1h}\necho \"error: the server doesn't have a resource type ciliumnodes\"; exit 1\n```\n\n"+
		"```bash {#heals target=local retries=2 interval=10ms}\nexit 1\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{}}}
	for id, wantAttempts := range map[string]int{"missing": 1, "kubectl-words": 1, "heals": 3} {
		r, err := e.Prepare(executor.Request{Runbook: rb, BlockID: id})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rec := r.Execute(ctx, &sink{})
		cancel()
		if rec.Status != executor.StatusFailed || rec.Attempts != wantAttempts {
			t.Errorf("%s: %s after %d attempts (want %d): %v", id, rec.Status, rec.Attempts, wantAttempts, rec.Reasons)
		}
		if wantAttempts == 1 && !strings.Contains(strings.Join(rec.Reasons, ";"), "not retried: ") {
			t.Errorf("%s: reasons do not say why it was not retried: %v", id, rec.Reasons)
		}
	}
}
