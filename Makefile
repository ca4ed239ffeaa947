# Two commands set everything up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_OUT ?= runs/demo

.PHONY: demo test test-all lint perf sysdeps clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[dev,ray]'
	touch $(STAMP)

sysdeps:
	@bash scripts/sysdeps.sh

demo: $(STAMP) sysdeps
	rm -rf $(DEMO_OUT)
	@echo "== 1. evaluate a recorded student under the minimal harness h"
	$(VENV)/bin/unscaffold run harbor --data examples/harbor \
		--student replay:examples/replay/harbor_student.json --concurrency 4 --out $(DEMO_OUT)/eval
	@echo "== 2. compile the example h* bank into the reviewer's reference K (recipes checked on examples)"
	$(VENV)/bin/unscaffold compile-k examples/hstar/harbor_bank --out $(DEMO_OUT)/K --suite harbor --data examples/harbor
	@echo "== 3. collect: the same student, reviewed before every step (PASS/REPLACE, budget 5)"
	$(VENV)/bin/unscaffold run harbor --data examples/harbor \
		--student replay:examples/replay/harbor_student.json --reviewer replay:examples/replay/harbor_reviewer.json \
		--knowledge $(DEMO_OUT)/K --budget 5 --concurrency 4 --out $(DEMO_OUT)/collect
	@echo "== 4. build the SFT data set from the collection, and an HTML report of it"
	$(VENV)/bin/unscaffold build-sft $(DEMO_OUT)/collect --out $(DEMO_OUT)/sft.jsonl
	$(VENV)/bin/unscaffold report $(DEMO_OUT)/collect

test: $(STAMP) sysdeps
	$(PY) -m pytest -q

test-all: $(STAMP) sysdeps
	$(PY) -m pytest -q -m ''

lint: $(STAMP)
	$(VENV)/bin/ruff check unscaffold tests perf

perf: $(STAMP) sysdeps
	$(PY) perf/harness_overhead.py
	$(PY) perf/build_sft_throughput.py
	$(PY) perf/ray_overhead.py
	$(PY) perf/sft_throughput.py
	$(PY) perf/spreadsheet_scoring.py

clean:
	rm -rf $(VENV) runs .pytest_cache
