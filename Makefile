# deltaflow — `make` lists the targets.
.DEFAULT_GOAL := help

# The Go toolchain deltaflow builds with (scripts/lib.sh says why); the go
# command fetches it from the module proxy the first time.
export GOTOOLCHAIN := $(shell sed -n 's/^GO_TOOLCHAIN="\(.*\)"/\1/p' scripts/lib.sh)

# The version stamped into release builds (`deltaflow version`,
# deltaflow_build_info): the git tag, else the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
# Release build flags: static, no build paths, no symbol tables, the version.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
GOFLAGS_RELEASE := -trimpath -ldflags="-s -w -X github.com/deltaflow/deltaflow/runtime/daemon.version=$(VERSION) -X github.com/deltaflow/deltaflow/runtime/daemon.revision=$(REVISION)"
# `make docker PLATFORMS=linux/arm64` for the Pi alone.
PLATFORMS ?= linux/arm64,linux/amd64
IMAGE ?= deltaflow:latest

.PHONY: help build cross release docker test test-short reliability fuzz deps servers-start servers-stop vet bench bench-steady size

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/deltaflow for this machine
	CGO_ENABLED=0 go build $(GOFLAGS_RELEASE) -o bin/deltaflow ./cmd/deltaflow

cross: ## static release binaries bin/deltaflow-linux-arm64 (the Pi) and -amd64
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build $(GOFLAGS_RELEASE) -o bin/deltaflow-linux-arm64 ./cmd/deltaflow
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build $(GOFLAGS_RELEASE) -o bin/deltaflow-linux-amd64 ./cmd/deltaflow
	@ls -l bin/deltaflow-linux-*

release: ## dist/: linux/arm64 and linux/amd64 tarballs, an SPDX SBOM each, SHA256SUMS (VERSION=, DIST=)
	VERSION=$(VERSION) scripts/release.sh

docker: ## multi-arch image with buildx (needs a Docker engine; not run in CI): IMAGE=, PLATFORMS=, PUSH=1
	docker buildx build --platform $(PLATFORMS) --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) $(if $(PUSH),--push,) .

test: ## full run: install + start MinIO, Kafka, NATS; vet, cross-build, govulncheck, go test -race, 10s per fuzz target (what CI runs)
	scripts/test.sh

test-short: ## go test -short without servers (server tests skip)
	go test -short -race -count=1 ./...

reliability: ## the long scenario suite on real servers: 1M-record SIGKILL loop, repeated MinIO/NATS/Kafka outages, scale-out (~20 min)
	DELTAFLOW_SCENARIO_LONG=1 DELTAFLOW_TEST_PKGS=./internal/tests/reliability DELTAFLOW_TEST_TIMEOUT=60m scripts/test.sh -v

# `make fuzz FUZZTIME=30m` for longer; a failing input lands in testdata/fuzz.
FUZZTIME ?= 5m

fuzz: ## run every fuzz target for FUZZTIME each (default 5m; `make test` runs them for 10s)
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

deps: ## install MinIO, Kafka jars, nats-server, nats CLI, kcat, govulncheck, Python deltalake (DELTAFLOW_CACHE)
	scripts/install-deps.sh

servers-start: ## start MinIO, Kafka and NATS for manual runs; then: source ~/.cache/deltaflow/state/env.sh
	scripts/install-deps.sh
	scripts/servers.sh start

servers-stop: ## stop the servers started by servers-start
	scripts/servers.sh stop

vet: ## go vet and gofmt check
	go vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }

bench: ## deltaflow bench: 1M events, then latency and startup, then the target check
	go build -o bin/deltaflow ./cmd/deltaflow
	bin/deltaflow bench --events 1000000 --output bench.json --png bench.png
	bin/deltaflow bench --throughput=false --latency --duration 30s --startup --output bench-latency.json
	bin/deltaflow bench --check bench.json bench-latency.json

bench-steady: ## deltaflow bench --steady: the Pi's load (17 events/s) and 1,000 events/s, 10 minutes each, embedded NATS (NATS_URL=… for an external server)
	go build -o bin/deltaflow ./cmd/deltaflow
	bin/deltaflow bench --throughput=false --steady 17,1000 $(if $(NATS_URL),--nats-url $(NATS_URL),) --output bench-steady.json
	bin/deltaflow bench --check bench-steady.json

size: ## linux/arm64 binary size per build (full, no embedded NATS, the image's) and its heaviest packages
	scripts/size.sh
