# deltaflow — `make` lists the targets.
.DEFAULT_GOAL := help

.PHONY: help test test-short deps servers-start servers-stop vet bench

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

test: ## full run: install + start MinIO, go vet, go test -race (what CI runs)
	scripts/test.sh

test-short: ## go test -short without servers (server tests skip)
	go test -short -race -count=1 ./...

deps: ## install the pinned MinIO and Python deltalake into the cache (DELTAFLOW_CACHE)
	scripts/install-deps.sh

servers-start: ## start MinIO for manual runs; then: source ~/.cache/deltaflow/state/env.sh
	scripts/servers.sh start

servers-stop: ## stop MinIO started by servers-start
	scripts/servers.sh stop

vet: ## go vet and gofmt check
	go vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }

bench: ## deltaflow bench: 1M events, then latency and startup, then the target check
	go build -o bin/deltaflow ./cmd/deltaflow
	bin/deltaflow bench --events 1000000 --json bench.json --png bench.png
	bin/deltaflow bench --throughput=false --latency --duration 30s --startup --json bench-latency.json
	bin/deltaflow bench --check bench.json bench-latency.json
