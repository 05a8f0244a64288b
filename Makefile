# ctxscope developer tasks. `make test` builds its own virtual environment from nothing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-fast check demo bench venv clean stack fidelity-docs backends

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

# The pure core alone (no OpenTelemetry SDK, no provider, no subprocess): seconds, for the edit loop.
test-fast: $(STAMP)
	$(PY) -m pytest -q tests/core

# Lint and types: ruff (rules in pyproject.toml) and mypy over src/ctxscope; .ci/run runs it.
check: $(STAMP)
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) bench/run.py

# The README's first command: a small coding agent (examples/coding_agent.py, the real openai
# SDK against ctxscope.testing's local server: no network, no key) under auto-instrumentation,
# then the `ctxscope context` report of its session. The local store goes to a temporary data
# directory, removed afterwards (DEMO_DATA_DIR=... keeps it somewhere of your choice).
DEMO_DATA_DIR ?=
demo: $(STAMP)
	@dir="$(DEMO_DATA_DIR)"; tmp=; if [ -z "$$dir" ]; then tmp=$$(mktemp -d); dir=$$tmp; fi; \
	if [ -z "$$TIKTOKEN_CACHE_DIR" ] && [ -d ../shared/tiktoken ]; then export TIKTOKEN_CACHE_DIR=$$(cd ../shared/tiktoken && pwd); fi; \
	CTXSCOPE_DATA_DIR="$$dir" CTXSCOPE_STORE=on OTEL_PYTHON_CONFIGURATOR=ctxscope OTEL_SERVICE_NAME=ctxscope-demo \
		$(VENV)/bin/opentelemetry-instrument $(PY) examples/coding_agent.py && echo && \
	CTXSCOPE_DATA_DIR="$$dir" $(VENV)/bin/ctxscope context --session demo-coding-agent; \
	status=$$?; if [ -n "$$tmp" ]; then rm -rf "$$tmp"; fi; exit $$status

# docs/fidelity.md's tables, regenerated from every request/response recording of the corpus
# (../shared/corpus/api: OpenAI with and without tools, Anthropic). Any file of that shape works:
# FIDELITY_FILES="a.jsonl b.jsonl" make fidelity-docs.
FIDELITY_FILES ?= $(sort $(wildcard ../shared/corpus/api/*/*.requests.jsonl))
fidelity-docs: $(STAMP)
	@test -n "$(FIDELITY_FILES)" || { echo "no recordings: set FIDELITY_FILES (../shared/corpus/api is not here)"; exit 1; }
	@if [ -z "$$TIKTOKEN_CACHE_DIR" ] && [ -d ../shared/tiktoken ]; then export TIKTOKEN_CACHE_DIR=$$(cd ../shared/tiktoken && pwd); fi; \
	$(VENV)/bin/ctxscope fidelity --docs docs/fidelity.md $(FIDELITY_FILES)

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis

# The Docker stack of compose.yaml: Collector, Prometheus, Grafana, Jaeger (docs/dashboards.md).
COMPOSE ?= docker compose
stack:
	$(COMPOSE) -f compose.yaml up

# The real backends of the end-to-end tests (docs/dashboards.md, "Verified for real"): the
# Collector built with the OpenTelemetry Collector Builder from backends/otelcol-builder.yaml,
# Jaeger v2 and Prometheus 3 built from the Go module proxy, VictoriaMetrics + vmalert from
# Debian trixie's .deb, Debian's Alertmanager. Built once into a cache outside the clone and
# reused (needs go for the builds; a first run takes minutes, a cached one about a second).
BACKENDS_DIR ?= $(or $(CTXSCOPE_BACKENDS_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ctxscope-backends)
backends:
	CTXSCOPE_BACKENDS_DIR="$(BACKENDS_DIR)" backends/build.sh all
