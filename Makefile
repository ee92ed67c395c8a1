# glm-operator — every target creates or reuses the local virtualenv .venv and installs what it needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml tools/localcluster/pyproject.toml | sha256sum | cut -c1-12)
KSTAMP := $(VENV)/.kernels-installed-$(shell cat pyproject.toml kernels/pyproject.toml | sha256sum | cut -c1-12)
VLLM_PIN := 0.32.0
VLLM_WHEEL_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/glm-kernels/vllm-wheel
EXAMPLE ?= examples/glm-5.3-pd.yaml
CHART := charts/glm-operator
# A real helm v3 from a PyPI wheel (glm_localcluster.helm); the chart tests and the local cluster use it.
HELM := $(VENV)/tools/helm

.PHONY: help venv cluster-binaries run test lint unit test-kernels bench-kernels check-vllm-symbols test-oracle flag-tables crds golden render plan chart images bench clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml tools/localcluster/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,lint]' -e tools/localcluster
	@rm -f $(VENV)/.installed-* && touch $@

# torch==2.13.0 is PyPI's CUDA build (~2.7 GB with its nvidia-* wheels; it runs on CPU: see kernels/README.md);
# ./kernels is installed editable on its own
# (it is also what images/vllm-glm pip-installs as a vLLM plugin).
$(KSTAMP): $(STAMP) kernels/pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,lint,kernels]' -e ./kernels
	@rm -f $(VENV)/.kernels-installed-* && touch $@

$(HELM): | $(STAMP)
	$(BIN)/python -m glm_localcluster.helm $(VENV)/tools

venv: $(STAMP) $(HELM) ## Create/refresh the virtualenv (.venv) with runtime, test and lint dependencies

cluster-binaries: ## Build the local cluster's binaries from pinned Go modules (first time ~7 min on a quiet 2-core machine; cached in ~/.cache/glm-operator)
	@bash tools/cluster/build.sh >/dev/null

run: $(STAMP) $(HELM) ## Main job: a local Kubernetes cluster (fake H200 nodes), the chart, the operator and EXAMPLE (RUN_ONCE=1: exit 0 once Ready; STATE_DIR=dir); with KUBECONFIG set (not a previous run's), the operator on that cluster
	@if [ -n "$$KUBECONFIG" ] && ! grep -qs 'cluster: glm-local$$' "$$KUBECONFIG"; then \
		echo "KUBECONFIG=$$KUBECONFIG: running the operator against that cluster (Ctrl-C to stop)"; \
		$(BIN)/glmctl run; \
	else \
		$(BIN)/glmctl dev --example $(EXAMPLE) $(if $(filter 1 true yes,$(RUN_ONCE)),--once,) $(if $(STATE_DIR),--state-dir $(STATE_DIR),); \
	fi

test: lint unit test-kernels ## Lint, then every test (unit, golden, schema, end-to-end on the real local cluster, `make run` itself, kernels)

unit: $(STAMP) $(HELM) cluster-binaries ## Run the operator test suite (tests/, incl. e2e on the local cluster, not tests/oracle; never imports torch)
	$(BIN)/pytest -q --ignore=tests/oracle

test-kernels: $(KSTAMP) ## Kernel tests on CPU: references, Triton kernels under TRITON_INTERPRET=1, 8-rank gloo PCP/DCP
	cd kernels && ../$(BIN)/pytest -q

bench-kernels: $(KSTAMP) ## Time the kernels on a GPU (table + kernels/bench-results.json); without a GPU says so, exits 0
	$(BIN)/python -m glm_kernels.bench --json kernels/bench-results.json

check-vllm-symbols: $(KSTAMP) ## Download the pinned vLLM wheel (~330 MB, cached) and check the plugin's symbol table
	@ls $(VLLM_WHEEL_DIR)/vllm-$(VLLM_PIN)-*.whl >/dev/null 2>&1 || \
		$(BIN)/python -m pip download -q --no-deps -d $(VLLM_WHEEL_DIR) vllm==$(VLLM_PIN)
	cd kernels && GLM_VLLM_WHEEL=$$(ls $(VLLM_WHEEL_DIR)/vllm-$(VLLM_PIN)-*.whl | head -1) ../$(BIN)/pytest -q tests/test_vllm_wheel.py

ORACLE_RELEASES := 0.32.0 0.33.0

test-oracle: $(STAMP) ## vLLM oracle: each release's own `vllm serve` parser judges every rendered command line (venvs in .oracle/, wheels cached; GLM_SKIP_VLLM_ORACLE=1 opts out)
	@for r in $(ORACLE_RELEASES); do bash oracle/setup_venv.sh $$r; done
	$(BIN)/pytest -q tests/oracle

flag-tables: ## Regenerate operator/glm_operator/plan/vllm_flags/<release>.json from each release's wheel (review the diff)
	@for r in $(ORACLE_RELEASES); do bash oracle/setup_venv.sh $$r && \
		.oracle/vllm-$$r/bin/python oracle/flag_table.py > operator/glm_operator/plan/vllm_flags/$$r.json; done

lint: $(KSTAMP) ## ruff + mypy (strict on the pure layers api/plan/render; kernels: typed defs, own config)
	$(BIN)/ruff check operator tests benchmarks kernels tools
	$(BIN)/mypy
	cd kernels && ../$(BIN)/mypy

crds: $(STAMP) ## Regenerate crds/glmdeployment.yaml and the chart's copy from the pydantic models
	$(BIN)/glmctl crd > crds/glmdeployment.yaml
	cp crds/glmdeployment.yaml $(CHART)/files/crds/glmdeployment.yaml

golden: $(STAMP) ## Regenerate tests/golden/*.yaml from examples/*.yaml (review the diff)
	$(BIN)/python -m tests.golden_update

render: $(STAMP) ## Print the manifests of EXAMPLE (default examples/glm-5.3-pd.yaml)
	$(BIN)/glmctl render $(EXAMPLE)

plan: $(STAMP) ## Print the capacity plan of EXAMPLE: weights/KV per GPU, max context, concurrency per role
	$(BIN)/glmctl plan $(EXAMPLE)

chart: $(STAMP) $(HELM) ## Lint and render the Helm chart (default values and ci/ci-values.yaml)
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/ci-values.yaml
	$(HELM) template glm-operator $(CHART) --namespace glm-system

images: ## Build images/vllm-glm and images/operator with docker buildx (needs a Docker engine; else says why and fails)
	@bash images/build.sh

bench: $(STAMP) cluster-binaries ## Benchmarks: plan+validate+render median (< 50 ms); the operator on the local cluster with 1/50/200 CRs: apply→children/Ready/quiet, requests and writes per CR, idle resync requests, CPU and RSS (table + benchmarks/results/reconcile.json; BENCH_ARGS="--counts 1,50")
	$(BIN)/python -m benchmarks.plan
	$(BIN)/python -m benchmarks.reconcile $(BENCH_ARGS)

clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache kernels/.pytest_cache kernels/.mypy_cache
