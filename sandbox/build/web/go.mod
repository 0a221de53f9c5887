// Module web is the sandbox's test workload server: what the Cilium runbook's
// nginx test pods serve, in an image no registry has to serve. Built with
// scripts/sandbox-bins.sh.
module github.com/cairn-dev/cairn/sandbox/build/web

go 1.26
