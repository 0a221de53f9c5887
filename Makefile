# Cairn. `make run` serves the bundled runbooks; `make test` runs every test.
GO       ?= go
BIN      := bin/cairn
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.Version=$(VERSION)
PORT     ?= 1313

.PHONY: all build run test test-unit check fmt vet bench bench-fanout clean fuzz

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/cairn

## run: build and serve the bundled runbooks on http://127.0.0.1:$(PORT) (or the next free port); starts the
## sandbox in the background when none runs (building its binaries the first time), reuses it when one does
run: deps build
	./$(BIN) serve --port $(PORT) --sandbox=start --sandbox-build "scripts/sandbox-bins.sh --core"

## test: vet, check the bundled content, and run all tests: the node tests (four clusters on sandbox nodes) last and
## alone, since beside the other packages the machine's load starved their API servers (TLS handshake timeouts)
test: deps test-bins vet
	$(GO) run ./cmd/cairn check content
	$(GO) test -count=1 -run '^TestCommonMarkConformance$$' -v ./site | grep '^commonmark:'
	$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -v '/nodetest$$')
	$(GO) test -count=1 -timeout 50m ./cmd/cairn/nodetest

test-unit:
	$(GO) test -short ./...

check:
	$(GO) run ./cmd/cairn check content

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## fuzz: run every fuzz target of every package briefly (FUZZTIME each; found with go test -list)
FUZZTIME ?= 30s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz: $$pkg $$t"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME); \
		done; \
	done

## bench: time cairn build against Hugo on 1,000 generated runbooks, and incremental rebuilds (not part of test)
bench: build
	@scripts/ci-deps.sh --bench || echo "make: the bench's peers (pssh, ansible) could not be installed (run as root); the fan-out compares fewer tools"
	$(GO) run ./bench --cairn $(BIN)
	@echo
	@echo "executor: request to first output, 100 MB streamed to an SSE client (throughput, peak heap), and the heap"
	@echo "held by 60 finished runs of 150,000 short lines against what the 64 MiB limit on kept runs counts"
	$(GO) test -run '^$$' -bench . -benchtime 3x ./executor/daemon
	@echo
	@echo "journal: open with 1 GB of history (time, bytes allocated), and one durable append"
	$(GO) test -run '^$$' -bench 'Journal' -benchmem -benchtime 5x ./executor

## bench-fanout: one block on 1, 4 and 19 sandbox nodes (WORKERS=16 light workers) over SSH and through the API (target=node); builds a cluster first (root, not part of test)
bench-fanout:
	scripts/bench-fanout.sh

clean:
	rm -rf bin public

.PHONY: deps test-bins sandbox-bins sandbox sandbox-nodes sandbox-down
## deps: the Debian packages the sandbox and the tests use (scripts/ci-deps.sh; apt-get only for what is
## missing, so as root on a fresh machine). Without root it says what is missing and goes on: the tests
## that need those packages then skip with the reason.
deps:
	@scripts/ci-deps.sh || echo "make: the Debian packages above could not be installed (run as root); going on without them"
## test-bins: every sandbox binary the tests use (built once from the module proxy, then cached)
test-bins:
	@scripts/sandbox-bins.sh || echo "make: sandbox binaries could not be built (see above); the tests that need them skip"
## sandbox-bins: build (once, cached) etcd, kube-apiserver and kube-controller-manager
sandbox-bins:
	scripts/sandbox-bins.sh
## sandbox: start a real cluster and SSH hosts for the bundled runbooks
sandbox: sandbox-bins
	$(GO) run ./cmd/cairn sandbox up
## sandbox-nodes: bare kubeadm-ready nodes instead (containerd, the kubelet service, node images): walk content/kubeadm-ha.md on them
sandbox-nodes: sandbox-bins
	$(GO) run ./cmd/cairn sandbox up --nodes
sandbox-down: build
	./$(BIN) sandbox down
