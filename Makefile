# Realm (Go). The two commands that matter: `make run` and `make test`.
# Everything is plain go and bash; the tool chain (buf, protoc plugins) is
# pinned in tools/go.mod and run with `go tool`, so a machine with Go needs
# nothing else.

SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

# Use the toolchain go.work names (see scripts/lib.sh), unless the
# environment sets GOTOOLCHAIN.
export GOTOOLCHAIN ?= auto

BIN     := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
LDFLAGS := -X github.com/realm-go/realm/pkg/version.Version=$(VERSION)

# Every main package under <module>/cmd/<name> (and services/<x>/cmd/<name>):
# a new service's binary is picked up without editing this file.
CMDS = $(patsubst %/,%,$(sort $(dir $(wildcard */cmd/*/*.go */*/cmd/*/*.go))))

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

.PHONY: run
run: ## Build, start the whole stack on the embedded store, register examples/ (Ctrl-C stops it).
	@scripts/run.sh

.PHONY: test
test: ## Run every module's tests with -race (starts Redis if it is not running).
	@scripts/test.sh

.PHONY: build
build: ## Build every binary into ./bin.
	@mkdir -p $(BIN)
	@echo "go build -> bin/: $(notdir $(CMDS))"
	@go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./,$(CMDS))

.PHONY: images
images: ## Build the container images (needs a Docker engine); see docs/deploy.md.
	@deploy/images.sh

.PHONY: generate
generate: ## Regenerate pkg/gen from proto/.
	cd tools && GOWORK=off go tool buf generate --template buf.gen.yaml

.PHONY: docs
docs: ## Regenerate docs/cli.md from the realm command definitions (cli/command).
	go run ./cli/command/gendocs -o docs/cli.md

.PHONY: check-generated
check-generated: ## Fail if pkg/gen differs from what proto/ generates.
	@scripts/check-generated.sh

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, layering, go mod tidy, buf lint.
	@scripts/lint.sh

.PHONY: vuln
vuln: ## govulncheck every module against the Go vulnerability database (via the module proxy).
	@scripts/vuln.sh

.PHONY: chaos
chaos: ## The long fault test: 200 webhook runs while every kind of process is SIGKILLed 4 times (tests/replicas TestChaos).
	@REALM_CHAOS_RUNS=$${REALM_CHAOS_RUNS:-200} REALM_CHAOS_KILLS=$${REALM_CHAOS_KILLS:-4} scripts/test.sh -run '^TestChaos$$' -v -timeout 40m

.PHONY: bench
bench: ## Issue #23's performance table, every row against its target (up to an hour; BENCH_QUICK=1 for a quick pass). Redis at REDIS_URL.
	@go run ./tests/bench $(BENCH_FLAGS)

.PHONY: bench-go
bench-go: ## Run the Go benchmarks of every module (no tests).
	@REALM_TEST_RACE=0 scripts/test.sh -run '^$$' -bench . -benchmem

.PHONY: fuzz
fuzz: ## Run each fuzz target (each has a seed corpus in testdata/fuzz) for FUZZTIME (default 30s).
	@scripts/fuzz.sh

.PHONY: clean
clean: ## Remove built binaries and test artefacts.
	rm -rf $(BIN) coverage.out coverage.html
	go clean -testcache
