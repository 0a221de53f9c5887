package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI scripts of testdata/script (txtar files, as Hugo
// and Runme test their CLIs): each one is commands, their expected output
// and exit codes, and the files they work on. They need no servers: a run
// is local blocks only, with no sandbox (each script has its own sandbox
// folder, never the reader's). `go test ./cmd/cairn -run TestScripts/NAME`
// runs one; UPDATE_SCRIPTS=1 rewrites the cmp files from the output.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		UpdateScripts:       updateScripts(),
		Setup: func(env *testscript.Env) error {
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("CAIRN_SANDBOX_DIR", filepath.Join(env.WorkDir, ".sandbox"))
			env.Setenv("KUBECONFIG", filepath.Join(env.WorkDir, "no-kubeconfig"))
			env.Setenv("NO_COLOR", "1")
			return nil
		},
	})
}

// updateScripts: UPDATE_SCRIPTS=1 rewrites the scripts' cmp files.
func updateScripts() bool { return os.Getenv("UPDATE_SCRIPTS") == "1" }
