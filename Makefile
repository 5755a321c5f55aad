# leanrig: `make demo` and `make test` work from a fresh clone; both run `make setup` first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
QUICK ?=
# Python's bytecode cache on (some environments turn it off): the suite starts about 700 Python
# processes, and each would compile leanrig's modules again (and pytest rewrite the tests).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup harnesses demo demo-run test test-fast lint typecheck suite bench bench-reference soak clean

setup: $(STAMP)
	@$(BIN)/leanrig bootstrap --quiet

# uv installs the pinned set (constraints.txt) and byte-compiles it on both cores: agents run
# in a sandbox that cannot write the venv, and would otherwise compile every module they import
# at each start. The venv gets no pip of its own: $(PY)'s pip puts uv in (its own pip when $(PY)
# has none). docs/architecture.md has the figures behind these choices.
$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv --without-pip $(VENV)
	$(PY) -m pip --python $(BIN)/python install -q -c constraints.txt uv 2>/dev/null \
	  || { $(BIN)/python -m ensurepip >/dev/null && $(BIN)/python -m pip install -q -c constraints.txt uv; }
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode -c constraints.txt \
	  -e '.[dev,bootstrap,report,ray,inspect]'
	@scripts/install-bwrap.sh || true
	@scripts/install-neovim.sh || true
	@scripts/install-emacs.sh || true
	@scripts/install-chromium.sh || true
	touch $(STAMP)

demo: setup
	$(BIN)/leanrig demo

# The pinned agent harnesses (Claude Code, Codex) from the npm registry, into leanrig's cache
# (scripts/harnesses/package-lock.json; once per lockfile). Without node/npm: says so, and the
# harness tests skip naming this target.
harnesses:
	@scripts/install-harnesses.sh

# The search agent (model-free) over the demo suite, baseline and LAD: the two runs' leaderboard
# and their comparison on stdout, plots in $(DEMO_RUN)/report/ and $(DEMO_RUN)/compare/.
DEMO_SUITE ?= lean_project/suites/demo
DEMO_RUN ?= runs/demo-run
DEMO_LIMIT ?= 120
DEMO_PARALLEL ?= 2
DEMO_AGENT := '$(abspath $(BIN))/leanrig agent search --mcp-config {mcp_config}'
DEMO_FLAGS = --suite $(DEMO_SUITE) --agent $(DEMO_AGENT) --time-limit $(DEMO_LIMIT) \
  --parallel $(DEMO_PARALLEL) --model none --agent-tool "leanrig agent search" --quiet
demo-run: setup
	rm -rf $(DEMO_RUN)
	$(BIN)/leanrig run $(DEMO_FLAGS) --out $(DEMO_RUN)/baseline --label "search, baseline"
	$(BIN)/leanrig run $(DEMO_FLAGS) --out $(DEMO_RUN)/lad --label "search, LAD" --condition lad
	$(BIN)/leanrig report $(DEMO_RUN)/baseline $(DEMO_RUN)/lad --out $(DEMO_RUN)/report
	$(BIN)/leanrig compare $(DEMO_RUN)/baseline $(DEMO_RUN)/lad --out $(DEMO_RUN)/compare

lint: setup
	$(BIN)/ruff check lsp_bridge repl_pool agent_tools leanrig tests bench
	$(BIN)/ruff format --check lsp_bridge repl_pool agent_tools leanrig tests bench

typecheck: setup
	$(BIN)/mypy

# The suite in tiers (tests/conftest.py TIERS): unit, lean, e2e, stress. Three workers; a test
# module's tests stay on one worker (its module fixtures start once), and the Ray ones share
# one (tests/conftest.py SHARED_WORKER).
# Three workers on two cores: much of a test's time is spent waiting on Lean, a harness or Ray.
# Groups start longest first (tests/conftest.py LONGEST_FIRST): xdist's default order (most
# tests first) starts long groups of few tests last, and the workers end further apart.
PYTEST := $(BIN)/pytest -q -n 3 --dist loadgroup --no-loadscope-reorder --durations=15

suite: setup
	$(PYTEST)

test: harnesses lint typecheck suite

# The inner loop: lint, types, and the unit and real-Lean tiers (no CLI subprocesses, sandboxes,
# editors or stress).
test-fast: lint typecheck
	$(PYTEST) -m "unit or lean"

# Results to bench/results/latest/ (QUICK=1: quick/), never over the committed reference
# tables; `make bench-reference` writes those (bench/results/*.json and SUMMARY.md).
bench: setup
	$(BIN)/python -m bench $(if $(QUICK),--quick,)

bench-reference: setup
	$(BIN)/python -m bench --reference

# Not part of `make test`: 16 sessions x 1200 steps over MCP (minutes); bench/results/soak.json.
soak: setup
	$(BIN)/python -m bench.soak

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
