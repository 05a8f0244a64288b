# ctxscope developer tasks. `make test` builds its own virtual environment from nothing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench venv clean stack

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis

# The Docker stack of compose.yaml: Collector, Prometheus, Grafana, Jaeger (docs/dashboards.md).
COMPOSE ?= docker compose
stack:
	$(COMPOSE) -f compose.yaml up
