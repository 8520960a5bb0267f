# Two commands for a newcomer: `make demo` and `make test`. Both create .venv and install everything they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The dev set-up pins the CPU build of torch that lies on these machines' disk; users bring their own build.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev,lightning,hf,notebook]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gputriage demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) gputriage-out .pytest_cache .mypy_cache .ruff_cache
