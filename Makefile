# leanrig: `make demo` and `make test` work from a fresh clone; both run `make setup` first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
QUICK ?=

.PHONY: setup demo test lint typecheck unit bench soak clean

setup: $(STAMP)
	@$(BIN)/leanrig bootstrap --quiet

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,bootstrap,report,ray]'
	@scripts/install-bwrap.sh || true
	@scripts/install-neovim.sh || true
	touch $(STAMP)

demo: setup
	$(BIN)/leanrig demo

lint: setup
	$(BIN)/ruff check lsp_bridge repl_pool agent_tools tests bench
	$(BIN)/ruff format --check lsp_bridge repl_pool agent_tools tests bench

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q

test: lint typecheck unit

bench: setup
	$(BIN)/python -m bench $(if $(QUICK),--quick,)

# Not part of `make test`: 16 sessions x 1200 steps over MCP (minutes); bench/results/soak.json.
soak: setup
	$(BIN)/python -m bench.soak

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
