# Run `make help` for the targets.

GO          ?= go
PKGS        ?= ./...
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo "$(GO) run honnef.co/go/tools/cmd/staticcheck@latest")

.DEFAULT_GOAL := help
.PHONY: help deps build test test-race test-short lint bench demo clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## Install redis-server and PostgreSQL if missing (apt-get)
	@scripts/deps.sh

build: ## Build bin/dibs
	$(GO) build -o bin/dibs ./cmd/dibs

test: deps ## Vet, then run every test with the race detector
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

test-race: test ## Same as test

test-short: deps ## Run the tests in -short mode, without the race detector
	$(GO) test -short -count=1 -timeout 10m $(PKGS)

lint: ## Check formatting, go vet and staticcheck
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

bench: deps ## Run the benchmarks
	$(GO) test -run '^$$' -bench . -benchtime 2s $(PKGS)
	scripts/bench-claim.sh

demo: ## Run the seed scenario against a throw-away server
	@scripts/deps.sh --redis-only
	$(GO) run ./cmd/dibs demo

clean: ## Remove build output
	rm -rf bin .tmp
