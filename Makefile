# reconciler — build, test and benchmark targets. `make help` lists them.

GO          ?= go
PKGS        ?= ./...
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN         ?= bin/reconciler
# Test timeout per package; Postgres suites run in parallel, each in its own schema.
TEST_FLAGS  ?= -count=1 -timeout 15m

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/reconciler
	$(GO) build -o $(BIN) ./cmd/reconciler

.PHONY: run
run: build ## Run the daemon on its embedded in-memory store (the demo workspace)
	./$(BIN) serve

.PHONY: test
test: ## Run every test, starting a throwaway PostgreSQL and Prometheus unless RECONCILER_TEST_DSN / _PROMETHEUS are set (installs chromium for the console's browser test)
	$(GO) build ./...
	scripts/with-postgres.sh scripts/with-prometheus.sh scripts/with-chromium.sh $(GO) test $(TEST_FLAGS) $(PKGS)

.PHONY: test-short
test-short: ## Run the tests that need no PostgreSQL (Postgres tests skip outside CI)
	$(GO) test -count=1 -short $(PKGS)

.PHONY: race
race: ## Run every test under the race detector (slower)
	scripts/with-postgres.sh scripts/with-prometheus.sh scripts/with-chromium.sh $(GO) test -race $(TEST_FLAGS) $(PKGS)

.PHONY: bench
bench: ## Run the Go benchmarks of the hot paths (Postgres ones start their own cluster)
	scripts/with-postgres.sh $(GO) test -run '^$$' -bench . -benchmem -benchtime 1s $(PKGS)

.PHONY: bench-durable
bench-durable: build ## Bench queue, release, workflow, River and a bare SKIP LOCKED loop on a stock-durability PostgreSQL
	cd bench && $(GO) build -o ../bin/bench-compare .
	RECONCILER_PG_DURABLE=1 scripts/with-postgres.sh scripts/bench-durable.sh

BENCH_SCALE_SIZES ?= 1000 10000 100000

.PHONY: bench-scale
bench-scale: build ## Bench release at BENCH_SCALE_SIZES targets (default 1000 10000 100000), without and with --policies, on a stock-durability PostgreSQL
	BENCH_SCALE_SIZES="$(BENCH_SCALE_SIZES)" RECONCILER_PG_DURABLE=1 scripts/with-postgres.sh scripts/bench-scale.sh

SOAK        ?= 5m

.PHONY: soak
soak: ## Loop the kill tests with random kill timings for SOAK (default 5m; make soak SOAK=10m); prints one summary line
	@RECONCILER_SOAK=$(SOAK) bash -o pipefail -c "scripts/with-postgres.sh $(GO) test -count=1 -v -timeout 24h -run '^TestSoak$$' ./cmd/reconciler/ | grep -E '^(soak:|FAIL|--- FAIL|ok|\s+[a-z_]+_test.go)'"

STARVATION ?= 300
STARVATION_HOGS ?=

.PHONY: starvation
starvation: ## CPU hogs (STARVATION_HOGS, default one per core; 0: quiet) while serve processes roll out STARVATION targets (default 300) with kills, once plainly and once in issue 30's shape (dev, staging, prod with progression, a cap of 50, ten kills, a second version mid-rollout): no lease taken from a live process, no live job lost, explain answers within 2 s
	@RECONCILER_STARVATION=$(STARVATION) RECONCILER_STARVATION_HOGS=$(STARVATION_HOGS) bash -o pipefail -c "scripts/with-postgres.sh $(GO) test -count=1 -v -timeout 30m -run '^TestStarvation(Progression)?$$' ./cmd/reconciler/ | grep -E '^(\s+[a-z_]+_test.go|--- |ok|FAIL)'"

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME each (default 30s; 1000000x = a million executions; FUZZMINIMIZETIME default 200x, a count of calls)
	FUZZTIME=$(or $(FUZZTIME),30s) FUZZMINIMIZETIME=$(or $(FUZZMINIMIZETIME),200x) scripts/fuzz.sh

HELM_VERSION ?= v3.21.4
HELM        ?= bin/helm
CHART       ?= deploy/helm/reconciler
IMAGE       ?= reconciler:dev

.PHONY: chart-check
chart-check: ## helm lint and helm template of deploy/helm/reconciler (builds helm HELM_VERSION from its Go module into bin/: slow the first time)
	GOBIN=$(CURDIR)/bin $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	$(HELM) lint --strict $(CHART) --set database.existingSecret=reconciler-database
	$(HELM) template reconciler $(CHART) --set database.existingSecret=reconciler-database \
	  --set serviceMonitor.enabled=true --set 'secretEnv[0].name=RECONCILER_SECRET_GITHUB_TOKEN,secretEnv[0].secretName=gh,secretEnv[0].key=token' >/dev/null
	@if $(HELM) template reconciler $(CHART) >/dev/null 2>&1; then echo "chart-check: rendered without database.existingSecret"; exit 1; fi
	@# No Kubernetes part enabled: no account, no token.
	@out=$$($(HELM) template reconciler $(CHART) --set database.existingSecret=db); \
	  if echo "$$out" | grep -qE 'kind: (ServiceAccount|Role)$$|automountServiceAccountToken: true'; then echo "chart-check: an account or token without a Kubernetes part"; exit 1; fi
	@# The kubernetes runtime and job agent: a ServiceAccount, a namespaced Role (pods; jobs) and its binding, the token mounted in serve's pods only.
	@out=$$($(HELM) template reconciler $(CHART) --namespace rec --set database.existingSecret=db \
	    --set kubernetes.runtime.enabled=true --set kubernetes.runtime.image=agent:1 --set kubernetes.jobAgent.enabled=true --set kubernetes.namespace=agents); \
	  for want in 'kind: ServiceAccount' 'kind: Role' 'kind: RoleBinding' 'namespace: agents' 'serviceAccountName: reconciler' \
	      'automountServiceAccountToken: true' 'resources: \[pods\]' 'verbs: \[get, list, watch, create, delete\]' 'resources: \[jobs\]' \
	      'value: kubernetes' 'value: "agents"'; do \
	    echo "$$out" | grep -q -- "$$want" || { echo "chart-check: the kubernetes render lacks $$want"; exit 1; }; done; \
	  if echo "$$out" | grep -q 'kind: ClusterRole'; then echo "chart-check: a cluster-wide role"; exit 1; fi; \
	  if echo "$$out" | sed -n '/name: reconciler-migrate/,$$p' | grep -q 'automountServiceAccountToken: true'; then echo "chart-check: the migration job mounts the token"; exit 1; fi
	@echo "chart-check: helm $(HELM_VERSION) lint and template ok"

.PHONY: image-check
image-check: ## docker build the image when a container builder answers (docker info); otherwise say it was skipped
	@if docker info >/dev/null 2>&1; then \
	  docker build --build-arg VERSION=$$(git describe --always --dirty 2>/dev/null || echo dev) -t $(IMAGE) . && \
	  docker run --rm $(IMAGE) --version && echo "image-check: built $(IMAGE)"; \
	else echo "image-check: SKIPPED: no container builder here (docker info failed); the image was not built"; fi

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, and no tracked file over 1 MiB outside the allow-list
	scripts/check-large-files.sh
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

.PHONY: docs
docs: ## Rewrite the generated references: docs/cli.md, docs/policies.md, docs/workflows.md and docs/openapi.json (tests fail when they are stale)
	UPDATE_DOCS=1 $(GO) test -count=1 -run 'Reference' ./cmd/reconciler/ ./policy/ ./workflow/
	UPDATE_OPENAPI=1 $(GO) test -count=1 -run OpenAPI ./api/

.PHONY: golden
golden: ## Rewrite the golden decisions in testdata/snapshots/golden
	$(GO) test ./reconcile/ -run TestGoldenSnapshots -update

.PHONY: screenshots
screenshots: ## Rewrite docs/console-*.png from the console's browser test (needs chromium)
	RECONCILER_SCREENSHOTS=1 scripts/with-chromium.sh $(GO) test -count=1 -run '^TestConsoleInBrowser$$' ./cmd/reconciler/

.PHONY: clean
clean: ## Remove build output
	rm -rf bin
