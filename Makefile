# Two commands for a newcomer: `make demo` and `make test`. Both create .venv and install everything they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The dev set-up pins the CPU build of torch that lies on these machines' disk; users bring their own build.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean browser tmux gpu-check

$(STAMP): pyproject.toml setup.py src/gputriage/tracing/_scan.c Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev,lightning,hf,notebook]"
	# An editable install leaves gputriage's own modules uncompiled, and where PYTHONDONTWRITEBYTECODE is set Python
	# never caches them: each command would compile them again (0.1 s), which an installed gputriage never does.
	$(BIN)/python -m compileall -q src/gputriage
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gputriage demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The HTML report's browser test drives Debian's chromium. Installing it needs root and apt; without them (or when
# the install fails) the test skips, and `make test` goes on.
browser:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || echo "chromium not installed: the browser test skips"

# The terminal tests drive a real terminal with tmux (tests/terminal/test_pipes_and_ci.py); without it they skip.
tmux:
	@command -v tmux >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux) || echo "tmux not installed: the terminal tests that need it skip"

pytest: $(STAMP) browser tmux
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

# Speed and memory goals, each printed as a ratio against a baseline run in the same session (about 20 minutes on
# 2 cores; Holistic Trace Analysis, which trace_vs_hta.py compares against, gets its own venv, bench/.venv-hta).
HTA_VENV := bench/.venv-hta

$(HTA_VENV)/bin/python:
	$(PYTHON) -m venv $(HTA_VENV)
	$(HTA_VENV)/bin/python -m pip install -q traceinsight

bench: $(STAMP) $(HTA_VENV)/bin/python
	$(BIN)/python bench/run_overhead.py
	if command -v valgrind >/dev/null; then $(BIN)/python bench/run_instructions.py; \
	else echo "valgrind is not installed: bench/run_instructions.py skipped"; fi
	$(BIN)/python bench/sampler_cost.py
	$(BIN)/python bench/merge_scale.py
	$(BIN)/python bench/trace_vs_hta.py
	$(BIN)/python bench/scan_sanitizers.py
	$(BIN)/python bench/trace_big.py
	$(BIN)/python bench/preflight_step.py
	$(BIN)/python bench/preflight_corpus.py --variants cpu,preflight,preflight-full

# On a machine with an NVIDIA GPU: the scenario scripts and the corpus on the real device (expected vs found root
# cause, NVML's numbers), a `run --trace` trace read back by `trace`, and the gpu-marked tests, in under 10 minutes.
# Without a GPU it says why and exits 0. It uses the venv when there is one, and never installs anything (a GPU box
# may have no network): GPU_PYTHON=... picks another interpreter.
GPU_PYTHON ?= $(shell test -x $(BIN)/python && echo $(BIN)/python || echo $(PYTHON))
gpu-check:
	$(GPU_PYTHON) bench/gpu_check.py

clean:
	rm -rf $(VENV) gputriage-out .pytest_cache .mypy_cache .ruff_cache
