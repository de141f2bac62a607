# Run `make help` for the targets.

GO          ?= go
PKGS        ?= ./...
FUZZTIME    ?= 30s
FAULTS_TIMEOUT ?= 30m
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo "$(GO) run honnef.co/go/tools/cmd/staticcheck@latest")

.DEFAULT_GOAL := help
.PHONY: help deps build image test test-k8s test-race test-short fuzz faults lint bench bench-bundle demo clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## Install redis-server, PostgreSQL, chromium and promtool if missing (apt-get)
	@scripts/deps.sh

build: ## Build bin/dibs
	$(GO) build -o bin/dibs ./cmd/dibs

image: ## Build the container image IMAGE:VERSION (default dibs:dev) with deploy/Dockerfile; needs docker; push it to your registry yourself
	docker build -f deploy/Dockerfile -t $(or $(IMAGE),dibs):$(or $(VERSION),dev) --build-arg VERSION=$(or $(VERSION),devel) .

test: deps ## Vet, then run every test with the race detector (the deploy/k8stest module's too, the benchmark bundle's smoke run included; the bench/watermill module is vetted)
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(MAKE) test-k8s
	cd bench/watermill && $(GO) vet ./...

test-k8s: ## Decode deploy/kubernetes strictly into the Kubernetes API types (a module of its own)
	cd deploy/k8stest && $(GO) vet ./... && $(GO) test -count=1 ./...

test-race: test ## Same as test

test-short: deps ## Run the tests in -short mode, without the race detector
	$(GO) test -short -count=1 -timeout 10m $(PKGS)
	$(MAKE) test-k8s

fuzz: deps ## Run every fuzz target for FUZZTIME each (default 30s; a count such as 3000x avoids Go 1.26's spurious "context deadline exceeded")
	@failed=""; \
	for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
	    echo "fuzz $$(dirname "$$f") $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) "$$(dirname "$$f")" || failed="$$failed $$t"; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed"; exit 1; fi

faults: deps ## Run the fault-injection suite in its long form (FAULTS_SEED= repeats a run)
	FAULTS_LONG=1 $(GO) test -count=1 -v -timeout $(FAULTS_TIMEOUT) ./faults/

lint: ## Check formatting, go vet and staticcheck
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

bench: deps ## Run the benchmarks
	$(GO) test -run '^$$' -bench . -benchtime 2s $(PKGS)
	CHART=docs/img/claim-cost.svg scripts/bench-claim.sh

bench-bundle: ## Build the benchmark bundle for a big Linux machine with no Go toolchain (OUT=, GOARCH=; BUNDLE_REDIS=1 adds this machine's redis-server and its libraries); see docs/benchmarks.md
	@scripts/bench-bundle-build.sh

demo: ## Run the seed scenario against a throw-away server
	@scripts/deps.sh --redis-only
	$(GO) run ./cmd/dibs demo

clean: ## Remove build output
	rm -rf bin .tmp
