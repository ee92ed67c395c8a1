# glm-operator — every target creates or reuses the local virtualenv .venv and installs what it needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
EXAMPLE ?= examples/glm-5.3-pd.yaml
CHART := charts/glm-operator
# A real helm v3 from a PyPI wheel (tests/helm_tool.py); the chart tests use it.
HELM := $(VENV)/tools/helm

.PHONY: help venv run test lint unit crds golden render plan chart images bench clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,lint]'
	@rm -f $(VENV)/.installed-* && touch $@

$(HELM): | $(STAMP)
	$(BIN)/python -m tests.helm_tool $(VENV)/tools

venv: $(STAMP) $(HELM) ## Create/refresh the virtualenv (.venv) with runtime, test and lint dependencies

run: $(STAMP) ## Main job: the operator on the cluster of KUBECONFIG, else on a local API emulator with examples/glm-5.3-pd.yaml (RUN_ONCE=1: exit after one reconcile)
	@if [ -n "$$KUBECONFIG" ]; then \
		echo "KUBECONFIG=$$KUBECONFIG: running the operator against that cluster (Ctrl-C to stop)"; \
		$(BIN)/glmctl run; \
	else \
		$(BIN)/glmctl dev --example $(EXAMPLE) $(if $(filter 1 true yes,$(RUN_ONCE)),--once,); \
	fi

test: lint unit ## Lint, then every test (unit, golden, schema, emulator end-to-end, `make run` itself)

unit: $(STAMP) $(HELM) ## Run the test suite only
	$(BIN)/pytest -q

lint: $(STAMP) ## ruff + mypy (strict on the pure layers api/plan/render)
	$(BIN)/ruff check operator tests benchmarks
	$(BIN)/mypy

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

images: ## Build images/vllm-glm and images/operator with docker buildx (needs a Docker engine; else says why, exit 1)
	@bash images/build.sh

bench: $(STAMP) ## Benchmarks: plan+validate+render median (target < 50 ms), requests per reconcile and apply→children latency on the emulator
	$(BIN)/python -m benchmarks.plan
	$(BIN)/python -m benchmarks.reconcile

clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
